// Escaping of the neutral graph's plain text for Graphviz: HTML-like labels and escString
// attributes (tooltips, ids). Private to dot/src; the renderers are the only callers.
#pragma once

#include <cstdint>
#include <string>

namespace tracerun::dot {

// Text for an HTML-like label: & < > " ' { } | become character references; '\n' becomes
// <BR ALIGN="LEFT"/> when `lineBreaks` (else a space); '\' is doubled (Graphviz would expand
// \N, \G... in labels too; two backslashes come out as one). Bytes that are not valid UTF-8 are
// replaced by U+FFFD so that the SVG stays well-formed XML.
std::string htmlText(const std::string& text, bool lineBreaks = true);

// Text for an escString attribute: a tooltip (`forId` false) or an id (`forId` true). Graphviz
// would expand \N \G \E \L and would keep "&name;" as an entity, so '&' becomes &amp;, '\n'
// &#10; (a line break in SVG tooltips), other control characters spaces, invalid UTF-8 U+FFFD,
// and each '\' the number of backslashes that comes out as one (measured on 2.42: four in a
// tooltip, two in an id). The SVG renderer escapes the remaining < > " itself.
std::string attributeText(const std::string& text, bool forId = false);

// "#rrggbb"
std::string hexColor(uint8_t r, uint8_t g, uint8_t b);

}  // namespace tracerun::dot

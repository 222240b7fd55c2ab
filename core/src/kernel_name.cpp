// Kernel names (kernel_name.h): abi::__cxa_demangle, a bracket-aware scan for the base name, and
// table labels that tell apart kernels sharing one.
// No caching here (callers cache per distinct name) and no CUDA.
#include "tracerun/core/kernel_name.h"

#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <vector>

namespace tracerun::core {
namespace {

bool endsWith(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

// Walks `s` at bracket depth 0: () {} [] nest strictly; < > count only where a '<' is open on top
// of the stack, so a stray '>' in an expression inside parentheses (a template argument like
// `(4>3)`) does not unbalance the scan. Calls at(i) for each position at depth 0 (before its
// bracket, if it is one, opens); at() returns false to stop. Returns whether the brackets balance
// (up to where it stopped).
template <typename At>
bool walkTopLevel(std::string_view s, At at) {
  std::vector<char> open;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (open.empty() && !at(i)) return true;
    switch (c) {
      case '(':
      case '{':
      case '[':
      case '<':
        open.push_back(c);
        break;
      case '>':
        if (!open.empty() && open.back() == '<') open.pop_back();
        break;
      case ')':
      case '}':
      case ']': {
        const char want = c == ')' ? '(' : c == '}' ? '{' : '[';
        while (!open.empty() && open.back() == '<') open.pop_back();
        if (open.empty() || open.back() != want) return false;
        open.pop_back();
        break;
      }
      default:
        break;
    }
  }
  return open.empty();
}

// The top-level pieces of a qualified name: where each component starts, after the last
// top-level space (what precedes it is the return type). False when the brackets do not balance.
bool components(std::string_view s, std::vector<size_t>* starts) {
  size_t lastSpace = 0;
  std::vector<size_t> colons;  // positions after each top-level "::"
  size_t secondColon = std::string_view::npos;
  const bool balanced = walkTopLevel(s, [&](size_t i) {
    if (i == secondColon) return true;
    if (s[i] == ' ') {
      lastSpace = i + 1;
      colons.clear();
    } else if (s[i] == ':' && i + 1 < s.size() && s[i + 1] == ':') {
      colons.push_back(i + 2);
      secondColon = i + 1;
    }
    return true;
  });
  if (!balanced) return false;
  starts->clear();
  starts->push_back(lastSpace);
  for (size_t p : colons) starts->push_back(p);
  return true;
}

size_t findTopLevel(std::string_view s, char what) {
  size_t found = std::string_view::npos;
  walkTopLevel(s, [&](size_t i) {
    if (s[i] != what) return true;
    found = i;
    return false;
  });
  return found;
}

std::vector<std::string_view> splitTopLevel(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t from = 0;
  walkTopLevel(s, [&](size_t i) {
    if (s[i] == sep) {
      out.push_back(trim(s.substr(from, i - from)));
      from = i + 1;
    }
    return true;
  });
  out.push_back(trim(s.substr(from)));
  return out;
}

// Where the template argument list that ends `s` opens (its first top-level '<', past the start),
// or npos when `s` does not end in one: "Kernel2<cutlass_...>" -> 7, "{lambda(float)#1}" -> npos.
size_t templateArgsOpen(std::string_view s) {
  if (!endsWith(s, ">")) return std::string_view::npos;
  const size_t lt = findTopLevel(s, '<');
  return lt == 0 ? std::string_view::npos : lt;
}

// The arguments of the template argument list opening at `lt` (templateArgsOpen).
std::vector<std::string_view> templateArgsAt(std::string_view s, size_t lt) {
  return splitTopLevel(s.substr(lt + 1, s.size() - lt - 2), ',');
}

// A component without its template arguments ("Kernel2<cutlass_...>" -> "Kernel2");
// "{lambda(float)#1}" and "operator()" stay whole.
std::string_view withoutTemplateArgs(std::string_view c) {
  const size_t lt = templateArgsOpen(c);
  return lt == std::string_view::npos ? c : c.substr(0, lt);
}

// The parameter list's opening parenthesis of a name ending in ')', or npos.
size_t parameterList(std::string_view s) {
  if (!endsWith(s, ")")) return std::string_view::npos;
  int depth = 0;
  for (size_t i = s.size(); i-- > 0;) {
    if (s[i] == ')') ++depth;
    if (s[i] == '(' && --depth == 0) return i;
  }
  return std::string_view::npos;
}

// `s` without a member function's trailing qualifiers and its parameter list.
std::string_view withoutParameters(std::string_view s) {
  for (bool again = true; again;) {
    again = false;
    for (std::string_view q : {" const", " volatile", " &&", " &", " noexcept"}) {
      if (endsWith(s, q)) {
        s = trim(s.substr(0, s.size() - q.size()));
        again = true;
      }
    }
  }
  if (const size_t p = parameterList(s); p != std::string_view::npos && p > 0) {
    s = trim(s.substr(0, p));
  }
  return s;
}

// What follows the last depth-0 "::" of `s` (all of it when none).
std::string_view lastScope(std::string_view s) {
  size_t after = 0;
  walkTopLevel(s, [&](size_t i) {
    if (s[i] == ':' && i + 1 < s.size() && s[i + 1] == ':') after = i + 2;
    return true;
  });
  return s.substr(after);
}

// The template arguments of the function a demangled name names (none: empty).
std::vector<std::string> functionTemplateArgs(std::string_view demangled) {
  const std::string_view s = withoutParameters(trim(demangled));
  std::vector<size_t> starts;
  if (s.empty() || !components(s, &starts)) return {};
  const std::string_view fn = s.substr(starts.back());
  const size_t lt = templateArgsOpen(fn);
  if (lt == std::string_view::npos) return {};
  std::vector<std::string> out;
  for (std::string_view a : templateArgsAt(fn, lt)) out.emplace_back(a);
  return out;
}

// A template argument as a table shows it: namespaces dropped, a function-local type named by its
// function ("f(int)::{lambda(float)#1}" -> "f"), nested arguments the same way.
std::string abbreviateArgument(std::string_view argument) {
  std::string text(argument);
  for (size_t at; (at = text.find("(anonymous namespace)::")) != std::string::npos;) {
    text.erase(at, sizeof "(anonymous namespace)::" - 1);
  }
  std::string_view a = trim(text);
  if (const size_t paren = findTopLevel(a, '('); paren != std::string_view::npos && paren > 0) {
    a = trim(a.substr(0, paren));
  }
  a = lastScope(a);
  const size_t lt = templateArgsOpen(a);
  if (lt == std::string_view::npos) return std::string(a);
  std::string out(a.substr(0, lt));
  out += '<';
  bool first = true;
  for (std::string_view inner : templateArgsAt(a, lt)) {
    if (!first) out += ", ";
    out += abbreviateArgument(inner);
    first = false;
  }
  out += '>';
  return out;
}

// `head<argument>` (just `head` for no argument) in at most `width` characters: the head's end
// goes first (down to 12 of its characters), then the argument's end.
std::string fitLabel(std::string head, std::string argument, size_t width) {
  if (argument.empty()) return head;
  const auto size = [&] { return head.size() + argument.size() + 2; };
  if (size() > width && head.size() > 12) {
    const size_t keep =
        std::max<size_t>(12, width > argument.size() + 5 ? width - argument.size() - 5 : 0);
    if (keep + 3 < head.size()) head = head.substr(0, keep) + "...";
  }
  if (size() > width) {
    const size_t room = width > head.size() + 5 ? width - head.size() - 5 : 0;
    argument = argument.substr(0, room) + "...";
  }
  return head + "<" + argument + ">";
}

}  // namespace

std::string demangleKernelName(std::string_view mangled) {
  if (mangled.size() < 2 || mangled.substr(0, 2) != "_Z") return std::string(mangled);
  const std::string name(mangled);  // NUL-terminated for the C API
  int status = 0;
  const std::unique_ptr<char, decltype(&std::free)> text(
      abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status), &std::free);
  if (status != 0 || text == nullptr) return name;
  return std::string(text.get());
}

std::string kernelShortName(std::string_view demangled) {
  std::string_view s = trim(demangled);
  if (s.empty()) return std::string(demangled);
  s = withoutParameters(s);  // trailing qualifiers of a member function, then the parameter list
  std::vector<size_t> starts;
  if (s.empty() || !components(s, &starts)) return std::string(trim(demangled));
  auto component = [&](size_t i) {
    const size_t from = starts[i];
    const size_t to = i + 1 < starts.size() ? starts[i + 1] - 2 : s.size();
    return withoutTemplateArgs(s.substr(from, to - from));
  };
  const size_t last = starts.size() - 1;
  std::string base(component(last));
  if (base.rfind("operator", 0) == 0 && last > 0)
    base = std::string(component(last - 1)) + "::" + base;
  if (base.empty()) return std::string(trim(demangled));
  return base;
}

std::vector<std::string> kernelTableLabels(const std::vector<std::string>& demangled,
                                           size_t width) {
  width = std::max<size_t>(width, 16);
  std::vector<std::string> labels;
  labels.reserve(demangled.size());
  std::map<std::string, std::vector<size_t>> byShort;
  for (size_t i = 0; i < demangled.size(); ++i) {
    labels.push_back(kernelShortName(demangled[i]));
    byShort[labels.back()].push_back(i);
  }
  for (const auto& [shortName, rows] : byShort) {
    if (rows.size() < 2) continue;
    // Each row's template arguments as shown; the position whose shown values differ the most
    // wins, the earliest on a tie (multi_tensor_apply_kernel's functor tells more rows apart than
    // its metadata type; two lambdas of one function read alike).
    std::vector<std::vector<std::string>> args;
    size_t most = 0;
    for (size_t r : rows) {
      args.emplace_back();
      for (const std::string& a : functionTemplateArgs(demangled[r])) {
        args.back().push_back(abbreviateArgument(a));
      }
      most = std::max(most, args.back().size());
    }
    const auto at = [&](size_t k, size_t a) {
      return a < args[k].size() ? args[k][a] : std::string();
    };
    size_t best = 0, bestDistinct = 1;
    for (size_t a = 0; a < most; ++a) {
      std::set<std::string> values;
      for (size_t k = 0; k < rows.size(); ++k) values.insert(at(k, a));
      if (values.size() > bestDistinct) {
        best = a;
        bestDistinct = values.size();
      }
    }
    if (bestDistinct < 2) continue;
    for (size_t k = 0; k < rows.size(); ++k) {
      labels[rows[k]] = fitLabel(shortName, at(k, best), width);
    }
  }
  // Cut to the width, then number what is still alike.
  for (auto& l : labels) {
    if (l.size() > width) l = l.substr(0, width - 3) + "...";
  }
  std::map<std::string, std::vector<size_t>> alike;
  for (size_t i = 0; i < labels.size(); ++i) alike[labels[i]].push_back(i);
  for (const auto& [label, rows] : alike) {
    if (rows.size() < 2) continue;
    for (size_t k = 0; k < rows.size(); ++k) {
      const std::string suffix = " #" + std::to_string(k + 1);
      std::string& l = labels[rows[k]];
      if (l.size() + suffix.size() > width) l = l.substr(0, width - suffix.size() - 3) + "...";
      l += suffix;
    }
  }
  return labels;
}

}  // namespace tracerun::core

#!/usr/bin/python3
# Parses a tracedot SVG as XML (xml.etree: a malformed file fails here) and prints one JSON object:
# the caption lines, every node group's id, tooltip and text lines, the edge count. Used by
# tests/dot to read what the picture says; it knows nothing of how tracedot builds it.
import json
import sys
import xml.etree.ElementTree as ET

SVG = "{http://www.w3.org/2000/svg}"
XLINK = "{http://www.w3.org/1999/xlink}"

root = ET.parse(sys.argv[1]).getroot()
graph = root.find(SVG + "g")
caption = [t.text or "" for t in graph.findall(SVG + "text")]
nodes, edges, clusters = [], 0, []
for g in graph.iter(SVG + "g"):
    cls = g.get("class")
    if cls == "edge":
        edges += 1
    elif cls in ("node", "cluster"):
        tip = ""
        for a in g.iter(SVG + "a"):
            tip = a.get(XLINK + "title") or ""
            break
        item = {"id": g.get("id"), "tooltip": tip,
                "text": [t.text or "" for t in g.iter(SVG + "text")]}
        (nodes if cls == "node" else clusters).append(item)
print(json.dumps({"caption": caption, "nodes": nodes, "clusters": clusters, "edges": edges}))

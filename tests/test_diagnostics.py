import json
from hcqdsl.ir import Span
from hcqdsl.diagnostics import Diagnostic, Related, render_text, render_json, render_sarif

SRC = {"p.hcq": "device g = AMD:0\nqueue q compute on g {\n  wait s >= 1\n}\n"}
D = Diagnostic("deadlock", "q waits forever for s >= 1", Span("p.hcq", 3, 3, 3, 14),
               related=(Related("q waits here", Span("p.hcq", 3, 3, 3, 14)), Related("a note without a place")),
               notes=("nothing writes s",), extra={"launch": 1, "queue": "q"})

def test_text():
  assert render_text([D], SRC) == ("p.hcq:3:3: error[deadlock]: q waits forever for s >= 1\n"
                                   "      wait s >= 1\n"
                                   "      ^~~~~~~~~~~\n"
                                   "  p.hcq:3:3: q waits here\n"
                                   "  a note without a place\n"
                                   "  note: nothing writes s\n")

def test_text_without_source_or_span():
  assert render_text([Diagnostic("syntax", "bad", None, "warning")]) == "warning[syntax]: bad\n"
  assert render_text([D], {}).splitlines()[1] == "  p.hcq:3:3: q waits here"

def test_json_fields():
  d = json.loads(render_json([D]))["diagnostics"][0]
  assert {k: d[k] for k in ("code", "severity", "file", "line", "column", "end_line", "end_column", "launch", "queue")} == \
    {"code": "deadlock", "severity": "error", "file": "p.hcq", "line": 3, "column": 3, "end_line": 3, "end_column": 14,
     "launch": 1, "queue": "q"}
  assert d["related"][0] == {"message": "q waits here", "file": "p.hcq", "line": 3, "column": 3}

def test_sarif():
  s = json.loads(render_sarif([D]))
  assert s["version"] == "2.1.0"
  r = s["runs"][0]["results"][0]
  assert r["ruleId"] == "deadlock" and r["level"] == "error"
  assert r["locations"][0]["physicalLocation"]["region"] == {"startLine": 3, "startColumn": 3, "endLine": 3, "endColumn": 14}
  assert r["relatedLocations"][0]["message"]["text"] == "q waits here"
  assert "deadlock" in [x["id"] for x in s["runs"][0]["tool"]["driver"]["rules"]]

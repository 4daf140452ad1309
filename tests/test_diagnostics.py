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

# ---- lazy diagnostics: the text of a warning a big program draws by the hundred thousand is built when first read

import pickle
import attrs
from hcqdsl.diagnostics import LazyDiagnostic, summary, has_errors

class _Lazy(LazyDiagnostic):
  __slots__ = ()
  code, severity = "deadlock", "error"

def _build(calls):
  def build(x):
    calls.append(x)
    return D.message, D.related, D.extra
  return build

def test_lazy_diagnostic_is_the_diagnostic_it_stands_for():
  calls = []
  a, b = _Lazy.many([D.span, D.span], _build(calls), ["a", "b"])
  eager = attrs.evolve(D, notes=())
  assert calls == [] and (a.code, a.severity, a.span, a.notes) == ("deadlock", "error", D.span, ())
  assert summary([a, b]) == "failed: 2 errors, 0 warnings" and has_errors([a]) and calls == []
  assert a == eager and eager == a and not a != eager and hash(a) == hash(eager) and calls == ["a"]
  assert repr(a) == repr(eager) and a.to_json() == eager.to_json() and render_text([a], SRC) == render_text([eager], SRC)
  assert calls == ["a"]  # built once
  assert attrs.evolve(b, notes=("n",)) == attrs.evolve(D, notes=("n",)) and type(attrs.evolve(b)) is Diagnostic
  assert pickle.loads(pickle.dumps(b)) == eager and calls == ["a", "b"]
  assert a != attrs.evolve(eager, message="other") and attrs.evolve(eager, message="other") != a
  assert not hasattr(a, "__dict__")

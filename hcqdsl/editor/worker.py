"""The language server's checking process (`python -m hcqdsl.editor.worker`): reads one job a line on stdin —
`{"id": N, "text": ..., "path": ...}` — and answers each with one line on stdout, `{"id": N, ...}` with
editor/analysis.py's `check_document`. A process of its own, so a long check (a 100k-statement program) neither holds
the server's interpreter nor outlives the edit that made it stale: the server kills it and starts another."""
from __future__ import annotations
import json, sys
from .analysis import check_document

__all__ = ["serve"]

def serve(inp, out) -> None:
  for line in inp:
    job = json.loads(line)
    try: result = check_document(job["text"], job["path"], job.get("launches"))
    except Exception as e:   # a bug of ours: said in one line, on the document, rather than a dead worker
      result = {"diagnostics": [{"range": [[0, 0], [0, 0]], "severity": 1, "code": "internal", "related": [],
                                 "message": f"hcqdsl: internal error: {type(e).__name__}: {e} (please report it with the input)"}],
                "launches": None, "count": 1}
    out.write(json.dumps({"id": job["id"], **result}) + "\n")
    out.flush()

if __name__ == "__main__":
  stdout, sys.stdout = sys.stdout, sys.stderr   # only the answers go to the server
  serve(sys.stdin, stdout)

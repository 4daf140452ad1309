"""One end-to-end test in a real editor: headless Neovim's built-in LSP client, set up as editors/nvim/hcqdsl.lua sets
it up for users, opens a program with a race and reads the diagnostic back (docs/editor.md)."""
import json, os, pathlib, shutil, subprocess, sys
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]

def test_neovim_shows_the_race(tmp_path):
  nvim = shutil.which("nvim")
  if nvim is None: pytest.skip("Neovim is not installed (`apt-get install neovim`)")
  prog = tmp_path / "race.hcq"
  prog.write_text((ROOT / "programs/race_missing_epoch.hcq").read_text())
  out = tmp_path / "diagnostics.json"
  script = tmp_path / "probe.lua"
  script.write_text(f"""
vim.g.hcqdsl_cmd = {{ {json.dumps(sys.executable)}, "-m", "hcqdsl", "lsp" }}
dofile({json.dumps(str(ROOT / "editors/nvim/hcqdsl.lua"))})
vim.cmd("edit " .. {json.dumps(str(prog))})
local ok = vim.wait(60000, function() return #vim.diagnostic.get(0) > 0 end, 50)
local got = {{}}
for _, d in ipairs(vim.diagnostic.get(0)) do
  table.insert(got, {{ lnum = d.lnum, col = d.col, severity = d.severity, code = d.code or (d.user_data and d.user_data.lsp.code),
                      message = d.message, source = d.source }})
end
vim.fn.writefile({{ vim.fn.json_encode({{ ok = ok, filetype = vim.bo.filetype, syntax = vim.bo.syntax, diagnostics = got }}) }},
                 {json.dumps(str(out))})
vim.cmd("qa!")
""")
  env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
  r = subprocess.run([nvim, "--headless", "-u", "NONE", "-i", "NONE", "-n", "--cmd", f"set rtp^={ROOT / 'editors/vim'}",
                      "-c", "filetype on", "-c", "syntax on", "-c", f"luafile {script}"],
                     capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
  assert out.exists(), (r.returncode, r.stdout[-2000:], r.stderr[-2000:])
  got = json.loads(out.read_text())
  assert got["ok"] and got["filetype"] == "hcq" and got["syntax"] == "hcq"
  [d] = got["diagnostics"]
  assert (d["lnum"], d["col"], d["severity"], d["code"], d["source"]) == (13, 2, 1, "race", "hcqdsl")
  assert d["message"].startswith("c0 writes a[0:4096] at line 14 (launch 2) and c1 reads a[0:4096] at line 20 (launch 1)")

"""The screenshots of docs/editor.md: Neovim (headless in tmux, a real terminal of 110x40) with hcqdsl's highlighting
and `hcqdsl lsp`, on the README's tour program with its `wait done0 >= kick` taken out: the race diagnostic and its
message, the quick fixes offered, and the program after the fix. Each screen is tmux's `capture-pane -e` (the cells
and their colours) drawn into a PNG with DejaVu Sans Mono. Needs nvim, tmux and Pillow (`pip install pillow`: this
tool's only, not hcqdsl's).

    python tools/editor_screenshot.py    # writes docs/img/nvim-race*.png
"""
from __future__ import annotations
import os, pathlib, re, shutil, subprocess, sys, tempfile, time

ROOT = pathlib.Path(__file__).resolve().parent.parent
COLS, ROWS = 110, 36
FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf"
BOLD = "/usr/share/fonts/truetype/dejavu/DejaVuSansMono-Bold.ttf"
FG, BG = (220, 220, 220), (24, 24, 28)
BASE16 = [(0, 0, 0), (205, 49, 49), (13, 188, 121), (229, 229, 16), (36, 114, 200), (188, 63, 188), (17, 168, 205), (229, 229, 229),
          (102, 102, 102), (241, 76, 76), (35, 209, 139), (245, 245, 67), (59, 142, 234), (214, 112, 214), (41, 184, 219), (255, 255, 255)]

def color256(n: int) -> tuple:
  if n < 16: return BASE16[n]
  if n < 232:
    n -= 16
    return tuple(0 if c == 0 else 55 + 40 * c for c in (n // 36, n // 6 % 6, n % 6))
  v = 8 + 10 * (n - 232)
  return (v, v, v)

def cells(ansi: str) -> list:
  """The screen as rows of (char, fg, bg, bold) from capture-pane -e output."""
  rows = []
  for line in ansi.split("\n")[:ROWS]:
    fg, bg, bold, row = FG, BG, False, []
    for m in re.finditer(r"\x1b\[([0-9;:]*)m|([^\x1b])", line):
      if m.group(2) is not None:
        row.append((m.group(2), fg, bg, bold))
        continue
      codes = [int(x) if x else 0 for x in re.split("[;:]", m.group(1))] or [0]
      i = 0
      while i < len(codes):
        c = codes[i]
        if c == 0: fg, bg, bold = FG, BG, False
        elif c == 1: bold = True
        elif c == 22: bold = False
        elif c == 7: fg, bg = bg, fg
        elif 30 <= c <= 37: fg = BASE16[c - 30]
        elif 90 <= c <= 97: fg = BASE16[c - 90 + 8]
        elif 40 <= c <= 47: bg = BASE16[c - 40]
        elif 100 <= c <= 107: bg = BASE16[c - 100 + 8]
        elif c == 39: fg = FG
        elif c == 49: bg = BG
        elif c in (38, 48) and i + 2 < len(codes) and codes[i + 1] == 5:
          if c == 38: fg = color256(codes[i + 2])
          else: bg = color256(codes[i + 2])
          i += 2
        elif c in (38, 48) and i + 4 < len(codes) and codes[i + 1] == 2:
          rgb = tuple(codes[i + 2:i + 5])
          if c == 38: fg = rgb
          else: bg = rgb
          i += 4
        i += 1
    rows.append(row)
  return rows

def render(ansi: str, out: pathlib.Path) -> None:
  from PIL import Image, ImageDraw, ImageFont
  font, bold = ImageFont.truetype(FONT, 15), ImageFont.truetype(BOLD, 15)
  w, h = 9, 19
  img = Image.new("RGB", (COLS * w + 16, ROWS * h + 16), BG)
  draw = ImageDraw.Draw(img)
  for y, row in enumerate(cells(ansi)):
    for x, (ch, fg, bg, b) in enumerate(row[:COLS]):
      px, py = 8 + x * w, 8 + y * h
      if bg != BG: draw.rectangle([px, py, px + w - 1, py + h - 1], fill=bg)
      if ch != " ": draw.text((px, py), ch, font=bold if b else font, fill=fg)
  img.save(out)

def tmux(*args) -> str: return subprocess.run(["tmux", "-L", "hcqshot", *args], check=True, capture_output=True, text=True).stdout

def wait_for(text: str, timeout: float = 60) -> str:
  for _ in range(int(timeout / 0.2)):
    screen = tmux("capture-pane", "-p", "-t", "shot")
    if text in screen: return tmux("capture-pane", "-e", "-p", "-t", "shot")
    time.sleep(0.2)
  raise TimeoutError(f"`{text}` never showed:\n{screen}")

def main() -> int:
  for tool in ("nvim", "tmux"):
    if shutil.which(tool) is None: sys.exit(f"{tool} is not installed (apt-get install {'neovim' if tool == 'nvim' else tool})")
  tmp = pathlib.Path(tempfile.mkdtemp(prefix="hcqshot_"))
  readme = (ROOT / "README.md").read_text()
  tour = re.search(r"## A short tour\n\n```\n(.*?)```", readme, re.S).group(1)
  prog = tmp / "tour.hcq"
  prog.write_text(tour.replace("  wait done0 >= kick\n", "", 1))
  init = tmp / "init.lua"
  init.write_text(f"""
vim.opt.rtp:prepend({str(ROOT / 'editors/vim')!r})
vim.g.hcqdsl_cmd = {{ {sys.executable!r}, "-m", "hcqdsl", "lsp" }}
dofile({str(ROOT / 'editors/nvim/hcqdsl.lua')!r})
vim.cmd("filetype on | syntax on | set number signcolumn=yes laststatus=2 noshowmode shortmess+=I")
vim.cmd("highlight NormalFloat ctermbg=236 ctermfg=252 | highlight FloatBorder ctermbg=236 ctermfg=244")
vim.diagnostic.config({{ virtual_text = true, float = {{ border = "rounded", source = "always" }} }})
""")
  env = {**os.environ, "PYTHONPATH": str(ROOT), "TERM": "xterm-256color"}
  subprocess.run(["tmux", "-L", "hcqshot", "kill-server"], capture_output=True)
  subprocess.run(["tmux", "-L", "hcqshot", "new-session", "-d", "-s", "shot", "-x", str(COLS), "-y", str(ROWS),
                  f"nvim -u {init} -i NONE -n {prog}"], check=True, env=env, cwd=tmp)
  try:
    wait_for("reads a[0:4096]")
    tmux("send-keys", "-t", "shot", ":19", "Enter")
    time.sleep(0.5)
    tmux("send-keys", "-t", "shot", ":lua vim.diagnostic.open_float()", "Enter")
    render(wait_for("note:"), ROOT / "docs/img/nvim-race.png")
    tmux("send-keys", "-t", "shot", "Escape", "")
    time.sleep(0.5)
    tmux("send-keys", "-t", "shot", ":lua vim.lsp.buf.code_action()", "Enter")
    render(wait_for("Fix: add"), ROOT / "docs/img/nvim-race-fixes.png")
    tmux("send-keys", "-t", "shot", "1", "Enter")
    time.sleep(3)   # the edit, then the check of the fixed text (debounced)
    render(wait_for("wait done0 >= kick"), ROOT / "docs/img/nvim-race-fixed.png")
  finally:
    subprocess.run(["tmux", "-L", "hcqshot", "kill-server"], capture_output=True)
    shutil.rmtree(tmp, ignore_errors=True)
  print("wrote docs/img/nvim-race.png, nvim-race-fixes.png, nvim-race-fixed.png")
  return 0

if __name__ == "__main__": sys.exit(main())

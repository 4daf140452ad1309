"""`hcqdsl graph FILE [-o OUT.dot|OUT.svg|OUT.png] [--launches N]`: the program as a picture.

One cluster per device holding one lane per queue, the host as its own lane; a node per statement (its text and
line), program order down each lane, and an arrow from each signal write to the waits it satisfies (the first write
that reaches the waited-for value since the signal's last lowering write, as `check` orders them), found by running
the unrolled program over the checked launches until every sequence is done or blocked. Errors of `check` are red:
the statements it reports (both sides of a race, every wait of a deadlock), with a dashed red edge between the two
sides of a race and from each blocked wait's would-be writers; warnings are orange.
"""
from __future__ import annotations
import bisect, re
from typing import Optional
from .ir import Program, Epoch, epoch_wait
from .lang.format import format_stmt
from .check.unroll import unroll, WAIT, WRITE, SUBMIT, ACCESS, POLL

Writer = Optional[tuple[int, int, int]]   # who wrote a value: (queue seq, op index, launch), None for the initial one

__all__ = ["to_dot", "signal_edges", "dot_to_svg", "read_dot"]

RED, ORANGE = "#d62728", "#ff7f0e"

def signal_edges(program: Program, launches: int = 1, var_values: Optional[dict] = None):
  """Run the unrolled program (each sequence until it blocks; a write wakes its waiters) and return
  (edges, submits, blocked, unrolled):
  edges: {(writer seq, op index, wait seq, op index): set of (writer launch, wait launch)};
  submits: {(host op index, queue seq): blocked?} for each submit of a queue;
  blocked: {seq: (op index, launch, needed value)} for the sequences stuck at a wait."""
  u = unroll(program, launches, var_values)
  seqs = u.seqs
  S = len(seqs)
  lens = [len(s.ops) for s in seqs]
  totals = [n * launches for n in lens]
  done = [0] * S
  value = list(u.sig_init)
  hist: list[tuple[list[int], list[Writer]]] = [([v], [None]) for v in value]   # per signal: values since its last lowering write, and their writers
  submitted: list[set[int]] = [set() for _ in range(S)]   # launches each queue has been submitted for
  words = list(u.cell_init)
  stored: list[Writer] = [None] * len(u.cell_init)   # polled words: values and their last store
  edges: dict = {}
  submits: dict = {}
  progress = True
  while progress:  # a fixpoint instead of wake-up queues: graphs are small
    progress = False
    for i in range(S):
      while done[i] < totals[i]:
        k, idx = divmod(done[i], lens[i])
        # not submitted for this launch yet (a queue outside its `launches` needs no submit: it is not there)
        if i and idx == 0 and (k + 1) not in submitted[i] and (k + 1) not in seqs[i].off: break
        op = seqs[i].ops[idx]
        if seqs[i].partial and seqs[i].absent(idx, k + 1): pass   # (not there in this launch)
        elif op[0] == WAIT:
          s, need = op[1], u.value(op, k + 1)
          if value[s] < need: break
          vals, who = hist[s]
          w = who[bisect.bisect_left(vals, need)]
          if w is not None and w[0] != i: edges.setdefault((w[0], w[1], i, idx), set()).add((w[2], k + 1))
        elif op[0] == WRITE:
          s, val = op[1], u.value(op, k + 1)
          if val < value[s]: hist[s] = ([val], [(i, idx, k + 1)])
          else:
            hist[s][0].append(val)
            hist[s][1].append((i, idx, k + 1))
          value[s] = val
        elif op[0] == SUBMIT:   # (each queue by the submit that hands it over in this launch)
          for q in op[1]:
            if u.gate_pos(q, k + 1) == k * lens[0] + idx + 1: submitted[q].add(k + 1)
        elif op[0] == POLL:   # passes on the word's value now; drawn from the store that put it there
          x = u.slot(op[1], op[5], k + 1)
          if words[x] & op[4] != u.value(op, k + 1): break
          w = stored[x]
          if w is not None and w[0] != i: edges.setdefault((w[0], w[1], i, idx), set()).add((w[2], k + 1))
        elif op[0] == ACCESS and len(op) > 2:
          for c, pin, keep, bits in op[2]:
            x = u.slot(c, pin, k + 1)
            words[x], stored[x] = words[x] & keep | bits[k], (i, idx, k + 1)
        done[i] += 1
        progress = True
  blocked = {}
  for i in range(S):
    if done[i] < totals[i]:
      k, idx = divmod(done[i], lens[i])
      op = seqs[i].ops[idx]
      if op[0] == WAIT and not (i and idx == 0 and (k + 1) not in submitted[i]):
        blocked[i] = (idx, k + 1, u.value(op, k + 1))
  for idx, op in enumerate(seqs[0].ops):
    if op[0] == SUBMIT:
      for q in op[1]: submits[(idx, q)] = any(l not in submitted[q] and l not in seqs[q].off for l in range(1, launches + 1))
  return edges, submits, blocked, u

def _q(s: str) -> str: return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'

def _nid(i, idx) -> str: return f"n{i}_{idx}"

def to_dot(program: Program, diagnostics: Optional[list] = None, launches: int = 1, var_values: Optional[dict] = None) -> str:
  """DOT text for `program`; `diagnostics` (from `check`) are highlighted; signal edges over `launches` launches."""
  edges, submits, blocked, u = signal_edges(program, launches, var_values)
  seqs = u.seqs
  color, extra = _highlights(seqs, diagnostics or [])
  out = [f"digraph {_q(program.file)} {{",
         "  graph [rankdir=TB, compound=true, fontname=\"Helvetica\", labelloc=t, nodesep=0.3, ranksep=0.35, "
         f"label={_q(program.file + (f' ({launches} launches)' if launches > 1 else ''))}];",
         "  node [shape=box, style=\"rounded,filled\", fillcolor=white, fontname=\"Courier\", fontsize=11];",
         "  edge [fontname=\"Helvetica\", fontsize=9];"]
  # without a `host` block the host only submits every queue: leave it out of the picture
  show_host = program.host is not None
  if show_host: out += _lane(u, 0, "host", "  ", color, blocked)
  for dev in program.devices:
    out.append(f"  subgraph {_q('cluster_dev_' + dev.name)} {{")
    out.append(f"    label={_q(f'{dev.name} ({dev.vendor}:{dev.index}' + (f' {dev.arch})' if dev.arch else ')'))}; "
               f"style=\"filled,rounded\"; fillcolor=\"#f3f6fb\"; color=gray60;")
    for i in range(1, len(seqs)):
      if seqs[i].device == dev.name: out += _lane(u, i, f"{seqs[i].name} ({seqs[i].queue.engine})", "    ", color, blocked)
    out.append("  }")
  out += _arrows(u, edges, submits, blocked, show_host) + extra
  out.append("}")
  return "\n".join(out) + "\n"

def _highlights(seqs, diagnostics: list) -> tuple[dict, list]:
  """(node -> color of the errors and warnings at it, the dashed lines between a race's two sides)."""
  at: dict = {}   # statement spans -> nodes, to place diagnostics
  for i, s in enumerate(seqs):
    for idx, st in enumerate(s.stmts):
      if st is not None and st.span is not None: at.setdefault(st.span.line, []).append((st.span.column, st.span.end_column, _nid(i, idx)))
  def node_of(span):
    if span is None: return None
    cands = at.get(span.line, [])
    for c0, c1, n in cands:
      if c0 <= span.column < max(c1, c0 + 1): return n
    return cands[0][2] if cands else None
  color: dict = {}
  extra: list = []
  for d in diagnostics:
    if d.severity not in ("error", "warning"): continue
    c = RED if d.severity == "error" else ORANGE
    n = node_of(d.span)
    if n is not None and color.get(n) != RED: color[n] = c
    rel = [node_of(r.span) for r in d.related]
    for r in rel:
      if r is not None and d.code in ("race", "signal-race", "non-monotonic", "deadlock") and color.get(r) != RED: color[r] = c
    if d.code in ("race", "signal-race", "non-monotonic") and n is not None and rel and rel[0] not in (None, n):
      extra.append(f"  {n} -> {rel[0]} [color={_q(c)}, fontcolor={_q(c)}, style=dashed, dir=both, constraint=false, "
                   f"penwidth=2, label={_q(d.code + (' on ' + str(d.extra['buffer']) if d.extra.get('buffer') else ''))}];")
  return color, extra

def _lane(u, i: int, title: str, ind: str, color: dict, blocked: dict) -> list:
  """Sequence i as a cluster: a node per statement, program order down the lane."""
  s = u.seqs[i]
  lines = [f"{ind}subgraph cluster_s{i} {{", f"{ind}  label={_q(title)}; style=\"rounded\"; color=gray50;"]
  for idx, st in enumerate(s.stmts):
    op = s.ops[idx]
    if i == 0 and op[0] == ACCESS:  # the host's writes: a rewritten buffer, patched kernel arguments
      text, line = "host writes " + ", ".join(u.buffers[a[0]].name for a in op[1]), ""
    elif st is None: text, line = "submit (implicit)", ""
    else: text, line = format_stmt(st), f"{st.span.line}: " if st.span is not None and st.span.line > 0 else ""
    c = color.get(_nid(i, idx))
    style = f", color={_q(c)}, fontcolor={_q(c)}, penwidth=2" if c else ""
    if c and i in blocked and blocked[i][0] == idx: style += ", fillcolor=\"#fde0e0\""
    lines.append(f"{ind}  {_nid(i, idx)} [label={_q(line + text)}{style}];")
  if not s.stmts: lines.append(f"{ind}  {_nid(i, 'empty')} [label=\"(empty)\", style=dashed];")
  for idx in range(1, len(s.stmts)):
    lines.append(f"{ind}  {_nid(i, idx - 1)} -> {_nid(i, idx)} [color=gray40, weight=10];")
  lines.append(f"{ind}}}")
  return lines

def _arrows(u, edges: dict, submits: dict, blocked: dict, show_host: bool) -> list:
  """The edges between lanes: host submits, signal writes to the waits they satisfy, a blocked wait's would-be writers."""
  seqs, out = u.seqs, []
  # host submits -> the first statement of each queue they hand over
  for (idx, q), stuck in sorted(submits.items()):
    if not seqs[q].stmts or not (show_host or stuck): continue
    st = f"color={_q(RED)}, style=dashed, penwidth=2, label=\"never submitted\", fontcolor={_q(RED)}" if stuck else "color=gray60, style=dotted"
    out.append(f"  {_nid(0, idx)} -> {_nid(q, 0)} [{st}];")
  # signal write -> the wait it satisfies
  for (wi, widx, ri, ridx), ls in sorted(edges.items()):
    wait = seqs[ri].stmts[ridx]
    if type(wait) is Epoch: wait = epoch_wait(seqs[ri].device)
    cond = f"{wait.signal.name} >= {wait.value}" if hasattr(wait, "signal") else format_stmt(wait)
    same = all(a == b for a, b in ls)
    if not same:
      shift = sorted({b - a for a, b in ls})
      cond += " (next launch)" if shift == [1] else f" (launch +{', +'.join(map(str, shift))})"
    style = "" if same else ", style=dashed, constraint=false"
    out.append(f"  {_nid(wi, widx)} -> {_nid(ri, ridx)} [color=\"#1f77b4\", fontcolor=\"#1f77b4\", penwidth=1.5, "
               f"label={_q(cond)}{style}];")
  # a blocked wait <- the statements that would write the value it needs, but are themselves stuck
  for i, (idx, launch, need) in sorted(blocked.items()):
    sig = seqs[i].ops[idx][1]
    for j, s in enumerate(seqs):
      if j == i: continue
      for widx, op in enumerate(s.ops):
        if op[0] == WRITE and op[1] == sig and u.value(op, launch) >= need:
          out.append(f"  {_nid(j, widx)} -> {_nid(i, idx)} [color={_q(RED)}, fontcolor={_q(RED)}, style=dashed, penwidth=2, "
                     f"constraint=false, label={_q(f'needs {u.signals[sig].name} >= {need} (launch {launch}): never')}];")
          break
  return out

# ---- SVG without Graphviz: the DOT graph above laid out in lanes (`graph -o OUT.svg` when `dot` is not installed)

_ATTR = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|[^,\];\s]+)')
_CHAR_W, _ROW_H, _NODE_H, _LANE_GAP, _PAD = 6.6, 44, 24, 90, 14

def _attrs(text: str) -> dict:
  out = {}
  for k, v in _ATTR.findall(text):
    out[k] = v[1:-1].replace('\\"', '"').replace("\\\\", "\\") if v.startswith('"') else v
  return out

def read_dot(dot: str) -> tuple:
  """(title, lanes, edges) of DOT text `to_dot` wrote: lanes [(device label or None, lane title, [(node id, its
  attributes)])] in order, edges [(from, to, attributes)]."""
  title, lanes, edges = "", [], []   # type: tuple[str, list, list]
  stack: list = []   # open subgraphs: [label, is a lane]
  for raw in dot.splitlines():
    line = raw.strip()
    if line.startswith("graph ["): title = _attrs(line).get("label", "")
    elif line.startswith("subgraph "):
      stack.append(["", "cluster_s" in line])
      if stack[-1][1]:
        dev = next((s[0] for s in reversed(stack[:-1]) if not s[1]), None)
        lanes.append([dev, "", []])
    elif line == "}" and stack: stack.pop()
    elif line.startswith("label=") and stack:
      stack[-1][0] = _attrs(line)["label"]
      if stack[-1][1]: lanes[-1][1] = stack[-1][0]
    elif " -> " in line:
      a, rest = line.split(" -> ", 1)
      b, _, at = rest.partition(" ")
      edges.append((a, b, _attrs(at)))
    elif re.match(r"n\w+ \[", line) and lanes and stack and stack[-1][1]:
      nid, _, at = line.partition(" ")
      lanes[-1][2].append((nid, _attrs(at)))
  return title, [tuple(x) for x in lanes], edges

def _rows(lanes, edges) -> dict:
  """Each node's row: below the one before it in its lane and below the writer of the signal it waits for (edges that
  order, not the dashed ones drawn without constraint), so time runs down the picture."""
  row = {nid: k for _, _, nodes in lanes for k, (nid, _) in enumerate(nodes)}
  order = [(a, b) for a, b, at in edges if at.get("constraint") != "false" and a in row and b in row]
  for _ in range(len(row)):   # longest paths by relaxation (a DAG: at most one pass per node)
    changed = False
    for a, b in order:
      if row[b] < row[a] + 1:
        row[b], changed = row[a] + 1, True
    if not changed: break
  return row

def _esc(s: str) -> str: return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")

def dot_to_svg(dot: str) -> str:
  """An SVG picture of `to_dot`'s graph: a column per queue (the host first), grouped in a box per device, a box per
  statement at its row (time runs down), program order down each lane, and the signal, submit and problem edges
  between lanes as curves with their labels, in DOT's colors and dash styles."""
  title, lanes, edges = read_dot(dot)
  row = _rows(lanes, edges)
  widths = [max([len(t) for t in [title_] + [at.get("label", "") for _, at in nodes]] + [8]) * _CHAR_W + 2 * _PAD
            for _, title_, nodes in lanes]
  xs, x, prev = [], 20.0, None
  for (dev, _, _), w in zip(lanes, widths):
    if prev is not None: x += _LANE_GAP + (16 if dev != prev else 0)
    xs.append(x)
    x, prev = x + w, dev
  top = 70
  pos = {nid: (xs[i], top + row[nid] * _ROW_H, widths[i]) for i, (_, _, nodes) in enumerate(lanes) for nid, _ in nodes}
  height = top + (max(row.values(), default=0) + 1) * _ROW_H + 30
  out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{x + 40:.0f}" height="{height:.0f}" font-family="Helvetica, Arial, sans-serif">',
         f'<title>{_esc(title)}</title>', '<defs>']
  colors = sorted({at.get("color", "gray40").strip('"') for _, _, at in edges})
  for i, c in enumerate(colors):
    out.append(f'<marker id="m{i}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse">'
               f'<path d="M0,0 L10,5 L0,10 z" fill="{_color(c)}"/></marker>')
  out += ['</defs>', '<rect width="100%" height="100%" fill="white"/>',
          f'<text x="20" y="24" font-size="14" font-weight="bold">{_esc(title)}</text>']
  out += _svg_boxes(lanes, xs, widths, top, height)
  for nid, (nx, ny, w) in pos.items():
    at = dict(next(at for _, _, nodes in lanes for n, at in nodes if n == nid))
    c, fill = _color(at.get("color", "black")), _color(at.get("fillcolor", "white"))
    sw = at.get("penwidth", "1")
    dash = ' stroke-dasharray="4,3"' if "dashed" in at.get("style", "") else ""
    out.append(f'<rect x="{nx + 6:.1f}" y="{ny:.1f}" width="{w - 12:.1f}" height="{_NODE_H}" rx="6" fill="{fill}" stroke="{c}" '
               f'stroke-width="{sw}"{dash}/>')
    out.append(f'<text x="{nx + w / 2:.1f}" y="{ny + 16:.1f}" font-family="Courier, monospace" font-size="11" text-anchor="middle" '
               f'fill="{_color(at.get("fontcolor", "black"))}">{_esc(at.get("label", nid))}</text>')
  for n, (a, b, at) in enumerate(e for e in edges if e[0] in pos and e[1] in pos):
    out += _svg_edge(pos[a], pos[b], at, colors, (0.75, 0.3, 0.55)[n % 3])
  out.append("</svg>")
  return "\n".join(out) + "\n"

def _color(c: str) -> str:
  c = c.strip('"')
  return "#" + f"{round(int(c[4:]) * 2.55):02x}" * 3 if re.fullmatch(r"gray\d+", c) else c   # Graphviz's grayN: N% white

def _svg_boxes(lanes, xs, widths, top: int, height: float) -> list:
  """A box per device around its lanes (with its label), and a titled box per lane."""
  out, i = [], 0
  while i < len(lanes):
    dev = lanes[i][0]
    j = i
    while j + 1 < len(lanes) and lanes[j + 1][0] == dev: j += 1
    if dev is not None:
      x0, x1 = xs[i] - 8, xs[j] + widths[j] + 8
      out.append(f'<rect x="{x0:.1f}" y="34" width="{x1 - x0:.1f}" height="{height - 44:.1f}" rx="10" fill="#f3f6fb" stroke="#999999"/>')
      out.append(f'<text x="{(x0 + x1) / 2:.1f}" y="48" font-size="12" text-anchor="middle">{_esc(dev)}</text>')
    for k in range(i, j + 1):
      out.append(f'<rect x="{xs[k]:.1f}" y="{top - 18}" width="{widths[k]:.1f}" height="{height - top + 4:.1f}" rx="8" fill="none" '
                 f'stroke="#808080"/>')
      out.append(f'<text x="{xs[k] + widths[k] / 2:.1f}" y="{top - 4}" font-size="11" text-anchor="middle">{_esc(lanes[k][1])}</text>')
    i = j + 1
  return out

def _svg_edge(a: tuple, b: tuple, at: dict, colors: list, t: float) -> list:
  """An arrow from node a to node b ((x, y, width) each): straight down a lane, else a curve between the facing sides,
  its label at `t` along the curve (staggered from edge to edge, so the labels of edges from one writer do not pile up)."""
  (ax, ay, aw), (bx, by, bw) = a, b
  c = at.get("color", "gray40").strip('"')
  style = at.get("style", "")
  dash = ' stroke-dasharray="6,4"' if "dashed" in style else ' stroke-dasharray="2,3"' if "dotted" in style else ""
  marker = f'marker-end="url(#m{colors.index(c)})"' + (f' marker-start="url(#m{colors.index(c)})"' if at.get("dir") == "both" else "")
  stroke = f'stroke="{_color(c)}" stroke-width="{at.get("penwidth", "1.2")}" fill="none"{dash} {marker}'
  if ax == bx and by > ay:   # program order: down the lane
    return [f'<path d="M{ax + aw / 2:.1f},{ay + _NODE_H:.1f} L{bx + bw / 2:.1f},{by:.1f}" {stroke}/>']
  right = bx > ax
  x1, x2 = (ax + aw - 6, bx + 6) if right else (ax + 6, bx + bw - 6)
  if ax == bx: x1 = x2 = ax + aw - 6   # within one lane, not in order: a loop on its right side
  y1, y2 = ay + _NODE_H / 2, by + _NODE_H / 2
  bend = max(40.0, abs(x2 - x1) / 3) * (1 if right or ax == bx else -1)
  c1, c2 = x1 + bend, x2 - bend if ax != bx else x2 + bend
  out = [f'<path d="M{x1:.1f},{y1:.1f} C{c1:.1f},{y1:.1f} {c2:.1f},{y2:.1f} {x2:.1f},{y2:.1f}" {stroke}/>']
  if at.get("label"):
    mx = (1 - t) ** 3 * x1 + 3 * (1 - t) ** 2 * t * c1 + 3 * (1 - t) * t * t * c2 + t ** 3 * x2
    my = (1 - t) ** 3 * y1 + 3 * (1 - t) ** 2 * t * y1 + 3 * (1 - t) * t * t * y2 + t ** 3 * y2 - 4
    out.append(f'<text x="{mx:.1f}" y="{my:.1f}" font-size="9" text-anchor="middle" fill="{_color(at.get("fontcolor", c))}" '
               f'stroke="white" stroke-width="3" paint-order="stroke">{_esc(at["label"])}</text>')
  return out

/**
 * The interactive API page at /docs: one self-contained HTML file (no CDN, works offline) that reads
 * /openapi.json, lists every operation with its parameters and schemas, and sends requests.
 */
export const docsHtml = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>caipay API</title>
<style>
  :root { color-scheme: light dark; --fg:#1b1f24; --muted:#5b6570; --bg:#fff; --panel:#f5f7f9; --line:#dde3e8; --accent:#0b63ce; }
  @media (prefers-color-scheme: dark) { :root { --fg:#e6e9ec; --muted:#9aa5b1; --bg:#0f1318; --panel:#171c22; --line:#2a323b; --accent:#5aa2ff; } }
  * { box-sizing: border-box; }
  body { margin:0; font:14px/1.5 system-ui, sans-serif; color:var(--fg); background:var(--bg); display:grid; grid-template-columns: 300px 1fr; height:100vh; }
  nav { border-right:1px solid var(--line); overflow:auto; padding:12px; background:var(--panel); }
  main { overflow:auto; padding:24px 32px; }
  h1 { font-size:18px; margin:0 0 4px; } h2 { font-size:13px; text-transform:uppercase; color:var(--muted); margin:16px 0 4px; }
  nav a { display:block; padding:3px 6px; border-radius:4px; color:var(--fg); text-decoration:none; white-space:nowrap; overflow:hidden; text-overflow:ellipsis; }
  nav a:hover, nav a.active { background:var(--line); }
  .m { display:inline-block; width:52px; font:600 11px ui-monospace, monospace; }
  .GET{color:#1a7f37} .POST{color:#0b63ce} .PUT,.PATCH{color:#9a6700} .DELETE{color:#cf222e}
  code, pre, textarea, input { font:12.5px ui-monospace, SFMono-Regular, monospace; }
  pre { background:var(--panel); border:1px solid var(--line); padding:10px; border-radius:6px; overflow:auto; max-height:420px; }
  table { border-collapse:collapse; width:100%; margin:6px 0 12px; } td, th { text-align:left; border-bottom:1px solid var(--line); padding:4px 6px; vertical-align:top; }
  input, textarea { width:100%; padding:5px 6px; border:1px solid var(--line); border-radius:4px; background:var(--bg); color:var(--fg); }
  textarea { min-height:140px; }
  button { padding:6px 14px; border:0; border-radius:4px; background:var(--accent); color:#fff; font-weight:600; cursor:pointer; }
  .muted { color:var(--muted); } .deprecated { text-decoration:line-through; }
  .auth { display:grid; grid-template-columns: 1fr 1fr; gap:6px; margin:8px 0; }
</style>
</head>
<body>
<nav><h1>caipay API</h1><div class="muted" id="version"></div>
  <div class="auth"><input id="apiKey" placeholder="Api-Key" autocomplete="off"><input id="merchantId" placeholder="Merchant-Id" autocomplete="off"></div>
  <div id="ops"></div></nav>
<main id="main"><p class="muted">Loading /openapi.json ...</p></main>
<script>
const $ = (s) => document.querySelector(s)
const esc = (t) => String(t).replace(/[&<>"']/g, (c) => ({'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;',"'":'&#39;'}[c]))
for (const id of ['apiKey', 'merchantId']) { const el = $('#' + id); el.value = localStorage.getItem('caipay.' + id) || ''; el.oninput = () => localStorage.setItem('caipay.' + id, el.value) }
function example(s, depth = 0) {
  if (!s || depth > 6) return null
  if (s.anyOf) return example(s.anyOf[0], depth + 1)
  if (s.oneOf) return example(s.oneOf[0], depth + 1)
  if (s.enum) return s.enum[0]
  if (s.const !== undefined) return s.const
  const t = Array.isArray(s.type) ? s.type.find((x) => x !== 'null') : s.type
  if (t === 'object') { const o = {}; for (const k of s.required || []) o[k] = example(s.properties[k], depth + 1); return o }
  if (t === 'array') return [example(s.items, depth + 1)].filter((x) => x !== null)
  if (t === 'integer' || t === 'number') return s.minimum ?? 1
  if (t === 'boolean') return true
  if (t === 'string') return s.format === 'email' ? 'shop@example.com' : s.format === 'uri' ? 'https://example.com/icon.png' : 'string'
  return null
}
let spec, ops = []
fetch('/openapi.json').then((r) => r.json()).then((d) => {
  spec = d; $('#version').textContent = 'version ' + d.info.version
  for (const [path, item] of Object.entries(d.paths)) for (const [method, op] of Object.entries(item)) ops.push({ path, method: method.toUpperCase(), op })
  const byTag = {}
  for (const o of ops) (byTag[o.op.tags?.[0] || 'Other'] ||= []).push(o)
  $('#ops').innerHTML = Object.entries(byTag).map(([tag, list]) => '<h2>' + esc(tag) + '</h2>' + list.map((o) =>
    '<a href="#' + o.op.operationId + '" class="' + (o.op.deprecated ? 'deprecated' : '') + '"><span class="m ' + o.method + '">' + o.method + '</span>' + esc(o.path) + '</a>').join('')).join('')
  window.onhashchange = show; show()
})
function show() {
  const id = location.hash.slice(1) || ops[0].op.operationId
  const o = ops.find((x) => x.op.operationId === id); if (!o) return
  document.querySelectorAll('nav a').forEach((a) => a.classList.toggle('active', a.getAttribute('href') === '#' + id))
  const params = (o.op.parameters || []).filter((p) => p.in !== 'header' || !['Merchant-Id'].includes(p.name))
  const body = o.op.requestBody?.content['application/json'].schema
  const ok = Object.entries(o.op.responses).find(([s]) => s.startsWith('2'))
  $('#main').innerHTML = '<h1><span class="m ' + o.method + '">' + o.method + '</span>' + esc(o.path) + '</h1>'
    + '<p>' + esc(o.op.summary || '') + (o.op.deprecated ? ' <b>(deprecated)</b>' : '') + '</p>'
    + (o.op.description ? '<p class="muted">' + esc(o.op.description) + '</p>' : '')
    + '<p class="muted">Auth: ' + esc((o.op.security || []).map((s) => Object.keys(s).join(' + ')).join(' or ') || 'none') + '</p>'
    + (params.length ? '<table><tr><th>Parameter</th><th>In</th><th>Value</th></tr>' + params.map((p, i) =>
        '<tr><td><code>' + esc(p.name) + '</code>' + (p.required ? ' *' : '') + '<div class="muted">' + esc(p.description || JSON.stringify(p.schema)) + '</div></td><td>' + p.in + '</td><td><input data-i="' + i + '"></td></tr>').join('') + '</table>' : '')
    + (body ? '<h2>Body</h2><textarea id="body">' + esc(JSON.stringify(example(body), null, 2)) + '</textarea>' : '')
    + '<p><button id="send">Send</button></p><pre id="out" class="muted">Response appears here.</pre>'
    + (body ? '<h2>Body schema</h2><pre>' + esc(JSON.stringify(body, null, 2)) + '</pre>' : '')
    + (ok ? '<h2>Response ' + ok[0] + '</h2><pre>' + esc(JSON.stringify(ok[1].content?.['application/json']?.schema, null, 2)) + '</pre>' : '')
  $('#send').onclick = async () => {
    let url = o.path; const query = new URLSearchParams(); const headers = {}
    document.querySelectorAll('input[data-i]').forEach((el) => {
      const p = params[el.dataset.i]; if (!el.value) return
      if (p.in === 'path') url = url.replace('{' + p.name + '}', encodeURIComponent(el.value))
      else if (p.in === 'query') query.append(p.name, el.value)
      else headers[p.name] = el.value
    })
    if ($('#apiKey').value) headers['Api-Key'] = $('#apiKey').value
    if ($('#merchantId').value && (o.op.parameters || []).some((p) => p.name === 'Merchant-Id')) headers['Merchant-Id'] = $('#merchantId').value
    const init = { method: o.method, headers }
    if (body) { init.body = $('#body').value; headers['Content-Type'] = 'application/json' }
    const res = await fetch(url + (query.size ? '?' + query : ''), init).catch((e) => ({ status: 0, text: async () => String(e), headers: new Headers() }))
    const text = await res.text(); let shown = text
    try { shown = JSON.stringify(JSON.parse(text), null, 2) } catch {}
    $('#out').className = ''; $('#out').textContent = res.status + '\\n' + shown
  }
}
</script>
</body>
</html>
`

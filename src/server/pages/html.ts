import { randomBytes } from 'node:crypto'

const entities: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
}

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => entities[c]!)
}

/** JSON for a `<script>` block: `<` escaped so no value can close the element. */
export function scriptJson(value: unknown): string {
  return JSON.stringify(value)
    .replace(/</g, '\\u003c')
    .replace(/\u2028/g, '\\u2028')
    .replace(/\u2029/g, '\\u2029')
}

export interface Page {
  html: string
  /** Sent as Content-Security-Policy: only this page's own inline script runs. */
  csp: string
}

export function renderPage(input: {
  title: string
  body: string
  style: string
  script: string
  /** Extra `:root` declarations (already validated). */
  rootVariables?: string
  theme?: 'light' | 'dark'
  /** Allowed embedders (`frame-ancestors`); the data form is shown inside wallets' web views and iframes. */
  frameAncestors: string
}): Page {
  const nonce = randomBytes(16).toString('base64')
  const html = `<!doctype html>
<html lang="en" data-theme="${input.theme ?? 'light'}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1, viewport-fit=cover">
<meta name="referrer" content="no-referrer">
<title>${escapeHtml(input.title)}</title>
<style nonce="${nonce}">${baseStyle}${input.style}${input.rootVariables ? `:root{${input.rootVariables}}` : ''}</style>
</head>
<body>
${input.body}
<script nonce="${nonce}">${input.script}</script>
</body>
</html>`
  const csp = [
    "default-src 'none'",
    `style-src 'nonce-${nonce}'`,
    `script-src 'nonce-${nonce}'`,
    "connect-src 'self'",
    'img-src https: data:',
    "form-action 'self'",
    "base-uri 'none'",
    `frame-ancestors ${input.frameAncestors}`,
  ].join('; ')
  return { html, csp }
}

const baseStyle = `
:root{--bg:#f6f7f9;--card:#fff;--text:#14161a;--muted:#5b6270;--border:#d9dde3;--accent:#3056d3;
--accent-text:#fff;--error:#c62828;--ok:#1b7f3b;--radius:14px;--font:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif}
[data-theme=dark]{--bg:#0f1115;--card:#181b21;--text:#eef0f4;--muted:#9aa3b2;--border:#2b303a;--accent:#6d8cff;
--accent-text:#0f1115;--error:#ff6b6b;--ok:#4cd47e}
*{box-sizing:border-box}
html,body{margin:0;background:var(--bg);color:var(--text);font-family:var(--font);font-size:16px;line-height:1.45}
main{max-width:440px;margin:0 auto;padding:max(16px,env(safe-area-inset-top)) 16px 24px}
.card{background:var(--card);border:1px solid var(--border);border-radius:var(--radius);padding:20px}
h1{font-size:1.25rem;margin:0 0 4px}
.muted{color:var(--muted);font-size:.9rem}
button{width:100%;min-height:48px;border:0;border-radius:calc(var(--radius) - 4px);background:var(--accent);
color:var(--accent-text);font:inherit;font-weight:600;cursor:pointer}
button[disabled]{opacity:.6;cursor:progress}
`

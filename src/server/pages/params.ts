import { collectFields } from '../gateway/collectData.js'

/** base64url JSON object, or undefined when absent or malformed (a bad hint must not break the form). */
function decodeObject(value: string | undefined): Record<string, unknown> | undefined {
  if (!value || value.length > 8192) return undefined
  try {
    const parsed: unknown = JSON.parse(Buffer.from(value, 'base64url').toString('utf8'))
    return parsed && typeof parsed === 'object' && !Array.isArray(parsed)
      ? (parsed as Record<string, unknown>)
      : undefined
  } catch {
    return undefined
  }
}

/** `prefill`: only the form's own fields, only strings. */
export function parsePrefill(value: string | undefined): Record<string, string> {
  const decoded = decodeObject(value) ?? {}
  const out: Record<string, string> = {}
  for (const { name } of collectFields) {
    const v = decoded[name]
    if (typeof v === 'string' && v.length <= 200) out[name] = v
  }
  return out
}

export function parseTheme(value: string | undefined): 'light' | 'dark' {
  return value === 'dark' ? 'dark' : 'light'
}

const variableName = /^(?:--)?[a-zA-Z][a-zA-Z0-9-]{0,63}$/
// Colours, lengths, font stacks: enough to theme, nothing that can end the declaration or load a URL.
const variableValue = /^[a-zA-Z0-9#%.,()\s"'+-]{1,200}$/

/**
 * `themeVariables`: base64url JSON of CSS custom properties (`{"--accent":"#0a7"}`; the `--` may be left
 * out). Unsafe names or values are dropped, so the result can go straight into a `:root` rule.
 */
export function parseThemeVariables(value: string | undefined): string {
  const decoded = decodeObject(value) ?? {}
  const declarations: string[] = []
  for (const [name, v] of Object.entries(decoded)) {
    if (typeof v !== 'string' && typeof v !== 'number') continue
    const text = String(v)
    if (!variableName.test(name) || !variableValue.test(text) || /url\s*\(/i.test(text)) continue
    declarations.push(`${name.startsWith('--') ? name : `--${name}`}:${text};`)
  }
  return declarations.join('')
}

// A dependency-free codec: the adapter runs in browsers and React Native, where Buffer is not a
// given and atob/btoa work on binary strings.
const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/'
const lookup = new Int16Array(128).fill(-1)
for (let i = 0; i < alphabet.length; i++) lookup[alphabet.charCodeAt(i)] = i

export function encodeBase64(bytes: Uint8Array): string {
  let out = ''
  for (let i = 0; i < bytes.length; i += 3) {
    const a = bytes[i]!
    const b = bytes[i + 1]
    const c = bytes[i + 2]
    out += alphabet[a >> 2]
    out += alphabet[((a & 3) << 4) | ((b ?? 0) >> 4)]
    out += b === undefined ? '=' : alphabet[((b & 15) << 2) | ((c ?? 0) >> 6)]
    out += c === undefined ? '=' : alphabet[c & 63]
  }
  return out
}

/** Decodes standard base64 (padding optional); undefined when the input is not base64. */
export function decodeBase64(text: string): Uint8Array | undefined {
  const clean = text.replace(/=+$/, '')
  if (clean.length % 4 === 1) return undefined
  const out = new Uint8Array(Math.floor((clean.length * 3) / 4))
  let bits = 0
  let value = 0
  let j = 0
  for (let i = 0; i < clean.length; i++) {
    const code = clean.charCodeAt(i)
    const digit = code < 128 ? lookup[code]! : -1
    if (digit < 0) return undefined
    value = (value << 6) | digit
    bits += 6
    if (bits >= 8) {
      bits -= 8
      out[j++] = (value >> bits) & 0xff
    }
  }
  return out
}

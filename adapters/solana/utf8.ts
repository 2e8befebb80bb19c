/**
 * UTF-8 to text. `TextDecoder` when the runtime has it; Hermes (React Native) does not, so a small decoder
 * stands in, following the WHATWG decoder: each malformed sequence becomes one U+FFFD.
 */
export function decodeUtf8(bytes: Uint8Array): string {
  const Decoder = (globalThis as { TextDecoder?: typeof TextDecoder }).TextDecoder
  if (Decoder) return new Decoder().decode(bytes)
  let out = ''
  let i = 0
  while (i < bytes.length) {
    const lead = bytes[i++]!
    if (lead < 0x80) {
      out += String.fromCharCode(lead)
      continue
    }
    // Continuation count and the allowed range of the first continuation byte (no overlong forms,
    // no surrogates, nothing past U+10FFFF).
    const [need, lower, upper] =
      lead >= 0xc2 && lead <= 0xdf
        ? [1, 0x80, 0xbf]
        : lead === 0xe0
          ? [2, 0xa0, 0xbf]
          : lead === 0xed
            ? [2, 0x80, 0x9f]
            : lead >= 0xe1 && lead <= 0xef
              ? [2, 0x80, 0xbf]
              : lead === 0xf0
                ? [3, 0x90, 0xbf]
                : lead === 0xf4
                  ? [3, 0x80, 0x8f]
                  : lead >= 0xf1 && lead <= 0xf3
                    ? [3, 0x80, 0xbf]
                    : [0, 0, 0]
    let code = lead & (0x3f >> need)
    let seen = 0
    while (seen < need) {
      const next = bytes[i]
      if (next === undefined || next < (seen === 0 ? lower : 0x80) || next > (seen === 0 ? upper : 0xbf))
        break
      code = (code << 6) | (next & 0x3f)
      i++
      seen++
    }
    out += need > 0 && seen === need ? String.fromCodePoint(code) : '\ufffd'
  }
  return out
}

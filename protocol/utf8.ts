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

/**
 * Strict UTF-8 decoding without TextDecoder (absent on some React Native engines): undefined for
 * overlong forms, surrogates, code points past U+10FFFF and truncated sequences.
 */
export function decodeUtf8Strict(bytes: Uint8Array): string | undefined {
  let out = ''
  for (let i = 0; i < bytes.length; ) {
    const first = bytes[i]!
    const length =
      first < 0x80 ? 1 : first >= 0xc2 && first < 0xe0 ? 2 : first >= 0xe0 && first < 0xf0 ? 3 : 4
    if (first >= 0xf5 || (first >= 0x80 && first < 0xc2)) return undefined
    if (i + length > bytes.length) return undefined
    let point = length === 1 ? first : first & (0xff >> (length + 1))
    for (let k = 1; k < length; k++) {
      const next = bytes[i + k]!
      if ((next & 0xc0) !== 0x80) return undefined
      point = (point << 6) | (next & 0x3f)
    }
    const smallest = [0, 0, 0x80, 0x800, 0x10000][length]!
    if (point < smallest || point > 0x10ffff || (point >= 0xd800 && point <= 0xdfff)) return undefined
    out += String.fromCodePoint(point)
    i += length
  }
  return out
}

import { renderSVG } from 'uqr'

/** The payment link as an inline SVG QR code (medium error correction survives a phone camera's glare). */
export function qrSvg(text: string): string {
  return renderSVG(text, { ecc: 'M', border: 2, pixelSize: 8 })
}

const alphabet = '123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz'
const alphabetIndex = new Map([...alphabet].map((char, index) => [char, index]))

/** Encodes base58 (Bitcoin alphabet), as Solana writes signatures and keys. */
export function encodeBase58(bytes: Uint8Array): string {
  let number = 0n
  for (const byte of bytes) number = (number << 8n) | BigInt(byte)
  let out = ''
  while (number > 0n) {
    out = alphabet[Number(number % 58n)]! + out
    number /= 58n
  }
  for (const byte of bytes) {
    if (byte !== 0) break
    out = `1${out}`
  }
  return out
}

/** Decodes base58 (Bitcoin alphabet); undefined for any character outside it. */
export function decodeBase58(value: string): Uint8Array | undefined {
  let number = 0n
  for (const char of value) {
    const digit = alphabetIndex.get(char)
    if (digit === undefined) return undefined
    number = number * 58n + BigInt(digit)
  }
  const bytes: number[] = []
  while (number > 0n) {
    bytes.push(Number(number & 0xffn))
    number >>= 8n
  }
  for (const char of value) {
    if (char !== '1') break
    bytes.push(0)
  }
  return Uint8Array.from(bytes.reverse())
}

/** A Solana public key: base58 text of exactly 32 bytes. */
export function isBase58PublicKey(value: string): boolean {
  if (value.length < 32 || value.length > 44) return false
  return decodeBase58(value)?.length === 32
}

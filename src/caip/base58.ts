const alphabet = '123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz'
const alphabetIndex = new Map([...alphabet].map((char, index) => [char, index]))

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

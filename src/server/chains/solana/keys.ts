import { Keypair } from '@solana/web3.js'
import { decodeBase58, encodeBase58 } from '../../../caip/base58.js'

// Signatures and keys as Solana writes them; the codec is the wallet's (src/caip), shared.
export { encodeBase58 }

/**
 * The service key from the config file: a base58 secret key (64 bytes, as wallets export it) or, for
 * people who keep `solana-keygen` files, the JSON byte array such a file holds.
 */
export function parseSolanaSecretKey(value: string): Keypair {
  const text = value.trim()
  const bytes = text.startsWith('[') ? jsonBytes(text) : decodeBase58(text)
  if (bytes?.length === 64) {
    try {
      return Keypair.fromSecretKey(bytes)
    } catch {
      // fromSecretKey checks that the public half matches the private one.
    }
  }
  throw new Error(
    'A Solana signerKey must be a base58 secret key of 64 bytes (or a solana-keygen JSON byte array).',
  )
}

function jsonBytes(text: string): Uint8Array | undefined {
  try {
    const parsed: unknown = JSON.parse(text)
    if (!Array.isArray(parsed) || !parsed.every((b) => Number.isInteger(b) && b >= 0 && b <= 255)) return
    return Uint8Array.from(parsed as number[])
  } catch {
    return undefined
  }
}

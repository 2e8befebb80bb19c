import { token2022ProgramId, tokenProgramId } from '../../protocol/solana/index.js'
import { decodeUtf8 } from '../../protocol/utf8.js'
import type { AssetInfo } from '../../src/actions/types.js'
import { encodeBase58 } from '../../src/caip/base58.js'
import type { SolanaReads } from './node.js'

// SPL mint layout: mint authority option (36), supply (8), decimals (1), is_initialized (1), freeze
// authority option (36). Token-2022 pads a mint to an account's size (165), then an account-type byte
// (1: mint) and its extensions as type (u16), length (u16), value.
const mintSize = 82
const decimalsOffset = 44
const initializedOffset = 45
const accountTypeOffset = 165
const mintAccountType = 1
const tokenMetadataExtension = 19
/** SOL's decimals: lamports per SOL is 10^9 on every cluster. */
const lamportDecimals = 9

/**
 * The decimals and, for a Token-2022 mint that carries its own metadata (the `TokenMetadata` extension
 * naming this mint), the symbol of a CAIP-19 asset on `chainId`, read from the wallet's own node. SOL
 * (`slip44:501`) has 9 decimals; Metaplex metadata (another account) is not read: a classic SPL mint
 * is named by its decimals only. The symbol is what the mint says about itself, no more trusted than an
 * ERC-20's `symbol()`.
 */
export async function readSolanaAssetInfo(
  asset: string,
  chainId: string,
  node: SolanaReads | undefined,
): Promise<AssetInfo | undefined> {
  const [chain, assetType] = splitOnce(asset, '/')
  if (chain !== chainId || !assetType) return undefined
  const [namespace, reference] = splitOnce(assetType, ':')
  if (namespace === 'slip44' && reference === '501') return { decimals: lamportDecimals }
  if (namespace !== 'token' || !reference || !node?.accountInfo) return undefined
  const account = await node.accountInfo(reference)
  if (!account || (account.owner !== tokenProgramId && account.owner !== token2022ProgramId)) return undefined
  const { data } = account
  if (data.length < mintSize || data[initializedOffset] !== 1) return undefined
  // A classic mint is exactly 82 bytes; 165 would be a token account, not a mint.
  if (
    data.length > mintSize &&
    (account.owner !== token2022ProgramId || data[accountTypeOffset] !== mintAccountType)
  )
    return undefined
  const decimals = data[decimalsOffset]!
  const symbol = account.owner === token2022ProgramId ? metadataSymbol(data, reference) : undefined
  return symbol === undefined ? { decimals } : { symbol, decimals }
}

/** The symbol of the mint's own `TokenMetadata` extension, when it names this mint. */
function metadataSymbol(data: Uint8Array, mint: string): string | undefined {
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength)
  for (let at = accountTypeOffset + 1; at + 4 <= data.length; ) {
    const type = view.getUint16(at, true)
    const length = view.getUint16(at + 2, true)
    const value = data.subarray(at + 4, at + 4 + length)
    if (value.length !== length) return undefined
    if (type === tokenMetadataExtension) {
      // update authority (32), mint (32), then borsh strings: name, symbol, uri.
      if (length < 64 || encodeBase58(value.subarray(32, 64)) !== mint) return undefined
      const name = readString(value, 64)
      const symbol = name && readString(value, name.end)
      return symbol?.text
    }
    at += 4 + length
  }
  return undefined
}

function readString(bytes: Uint8Array, at: number): { text: string; end: number } | undefined {
  if (at + 4 > bytes.length) return undefined
  const length = new DataView(bytes.buffer, bytes.byteOffset + at, 4).getUint32(0, true)
  if (at + 4 + length > bytes.length) return undefined
  return { text: decodeUtf8(bytes.subarray(at + 4, at + 4 + length)), end: at + 4 + length }
}

function splitOnce(text: string, separator: string): [string, string | undefined] {
  const i = text.indexOf(separator)
  return i < 0 ? [text, undefined] : [text.slice(0, i), text.slice(i + 1)]
}

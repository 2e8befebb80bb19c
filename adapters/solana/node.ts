// The wallet's own Solana node, as a web3.js `Connection` or a @solana/kit `Rpc`, typed structurally so
// neither SDK is imported: a kit-only wallet installs no web3.js (caipay/adapters/solana-kit).
import { decodeBase64, encodeBase64 } from '../../protocol/solana/index.js'

/** A web3.js account key, as `Connection.getAccountInfo` reads it (only its base58 text). */
interface Base58Key {
  toBase58(): string
}

/** The reads the Solana signer needs from a web3.js `Connection` (one has them all). */
export interface SolanaNode {
  isBlockhashValid(blockhash: string, config: { commitment: 'confirmed' }): Promise<{ value: boolean }>
  getSignatureStatus(
    signature: string,
    config: { searchTransactionHistory: boolean },
  ): Promise<{ value: SignatureState | null }>
  /** For `describeAsset` (a mint's decimals and symbol); without it the signer names no asset. */
  getAccountInfo?(
    key: Base58Key,
    commitment: 'confirmed',
  ): Promise<{ owner: Base58Key; data: Uint8Array } | null>
}

/** A kit RPC call: `rpc.method(...).send()`. */
interface KitRpcCall<T> {
  send(config?: { abortSignal?: AbortSignal }): Promise<T>
}

/**
 * The reads the Solana signer needs from a @solana/kit `Rpc` (`createSolanaRpc(url)` has them all).
 * Kit brands addresses and blockhashes; caipay passes the base58 text the chain gave it.
 */
export interface SolanaKitRpc {
  isBlockhashValid(blockhash: never, config: { commitment: 'confirmed' }): KitRpcCall<{ value: boolean }>
  getSignatureStatuses(
    signatures: never,
    config: { searchTransactionHistory: boolean },
  ): KitRpcCall<{ value: readonly (SignatureState | null)[] }>
  getAccountInfo(
    address: never,
    config: { commitment: 'confirmed'; encoding: 'base64' },
  ): KitRpcCall<{ value: { owner: string; data: readonly [string, string] } | null }>
  /** For revoking a mandate (with `sendTransaction`). */
  getLatestBlockhash?(config: { commitment: 'confirmed' }): KitRpcCall<{ value: { blockhash: string } }>
  sendTransaction?(
    transaction: never,
    config: { encoding: 'base64'; preflightCommitment: 'confirmed' },
  ): KitRpcCall<string>
}

/** A signature's status as nodes answer it: `err` null when it executed without error. */
export interface SignatureState {
  err: unknown
  confirmationStatus?: 'processed' | 'confirmed' | 'finalized' | null
}

/** What the signer reads, whichever SDK the node comes from. */
export interface SolanaReads {
  blockhashIsValid(blockhash: string): Promise<boolean>
  /** The signature's status; null when the node has none. */
  signatureStatus(signature: string): Promise<SignatureState | null>
  /** The account's owner program and data; null when it does not exist. */
  accountInfo?(address: string): Promise<{ owner: string; data: Uint8Array } | null>
  /** A recent blockhash, and a send of signed bytes (returning the signature): what a revoke needs. */
  latestBlockhash?(): Promise<string>
  send?(bytes: Uint8Array): Promise<string>
}

// `confirmed` throughout: a blockhash the confirmed bank knew at signing and no longer accepts has aged
// out, so every block that could still hold the transaction is already confirmed (and searched).
const commitment = 'confirmed'

export function readsFromConnection(node: SolanaNode): SolanaReads {
  const { getAccountInfo } = node
  const { getLatestBlockhash, sendRawTransaction } = node as Partial<SolanaSendingNode>
  return {
    blockhashIsValid: async (blockhash) => (await node.isBlockhashValid(blockhash, { commitment })).value,
    signatureStatus: async (signature) =>
      (await node.getSignatureStatus(signature, { searchTransactionHistory: true })).value,
    ...(getAccountInfo && {
      async accountInfo(address: string) {
        const info = await getAccountInfo.call(node, { toBase58: () => address }, commitment)
        return info && { owner: info.owner.toBase58(), data: info.data }
      },
    }),
    ...(getLatestBlockhash &&
      sendRawTransaction && {
        latestBlockhash: async () => (await getLatestBlockhash.call(node, { commitment })).blockhash,
        send: (bytes: Uint8Array) =>
          sendRawTransaction.call(node, bytes, { preflightCommitment: commitment }),
      }),
  }
}

/** What a web3.js Connection sends with: a revoke's blockhash and its send. */
export interface SolanaSendingNode {
  getLatestBlockhash(config: { commitment: 'confirmed' }): Promise<{ blockhash: string }>
  sendRawTransaction(bytes: Uint8Array, options: { preflightCommitment: 'confirmed' }): Promise<string>
}

export function readsFromKitRpc(rpc: SolanaKitRpc): SolanaReads {
  return {
    blockhashIsValid: async (blockhash) =>
      (await rpc.isBlockhashValid(blockhash as never, { commitment }).send()).value,
    signatureStatus: async (signature) =>
      (await rpc.getSignatureStatuses([signature] as never, { searchTransactionHistory: true }).send())
        .value[0] ?? null,
    async accountInfo(address) {
      const { value } = await rpc.getAccountInfo(address as never, { commitment, encoding: 'base64' }).send()
      const data = value && decodeBase64(value.data[0])
      return value && data ? { owner: value.owner, data } : null
    },
    ...(rpc.getLatestBlockhash &&
      rpc.sendTransaction && {
        latestBlockhash: async () => (await rpc.getLatestBlockhash!({ commitment }).send()).value.blockhash,
        send: (bytes: Uint8Array) =>
          rpc.sendTransaction!(encodeBase64(bytes) as never, {
            encoding: 'base64',
            preflightCommitment: commitment,
          }).send(),
      }),
  }
}

import type { Address, Hash, Hex } from 'viem'
import type { RpcTransaction, TypedDataPayload } from '../../protocol/evm/index.js'
import type { EvmNode } from './signatureStatus.js'

/** One key on one chain. */
export interface EvmAccountRef {
  chainId: number
  address: Address
}

/**
 * What the signer needs from a key holder. The three sources (local account, WalletClient,
 * EIP-1193 provider) each implement it once; `evmSigner` owns validation, routing and errors.
 * Inputs are already validated: the chain and address are the signer's own.
 */
export interface EvmBackend {
  readonly accounts: readonly EvmAccountRef[]
  signTypedData(chainId: number, address: Address, typedData: TypedDataPayload): Promise<Hex>
  signMessage(chainId: number, address: Address, message: Hex): Promise<Hex>
  sendTransaction(chainId: number, tx: RpcTransaction): Promise<Hash>
  /** `signal`: the flow stopped waiting; a backend that keeps the transaction alive stops doing so. */
  waitForReceipt(chainId: number, hash: Hash, signal?: AbortSignal): Promise<'success' | 'reverted'>
  /** The wallet's own node on `chainId`, for reads that prove what became of a signature. */
  node(chainId: number): EvmNode
}

export interface ReceiptOptions {
  /** How often to poll for a receipt, ms. Default 1000 (a local node mines at once; L2s in ~1-2 s). */
  pollingInterval?: number
  /** Give up waiting for a receipt after this long, ms. Default 180 000. */
  receiptTimeoutMs?: number
}

export const defaultPollingInterval = 1_000
export const defaultReceiptTimeoutMs = 180_000

/**
 * The slice of the Wallet Standard (`@wallet-standard/base`, `@solana/wallet-standard-features`)
 * the adapter uses, typed structurally so wallets need no extra package.
 */
export interface WalletStandardSolanaAccount {
  readonly address: string
  readonly publicKey: Uint8Array
  /** Wallet Standard chain names, e.g. `solana:mainnet`, or CAIP-2 ids. */
  readonly chains: readonly string[]
  readonly features: readonly string[]
}

export interface SolanaSignTransactionInput {
  readonly account: WalletStandardSolanaAccount
  readonly transaction: Uint8Array
  readonly chain?: string
}

export interface SolanaSignTransactionOutput {
  readonly signedTransaction: Uint8Array
}

/** The value of a wallet's `solana:signTransaction` feature. */
export interface SolanaSignTransactionFeature {
  readonly version: string
  readonly supportedTransactionVersions: readonly ('legacy' | 0)[]
  signTransaction(
    ...inputs: readonly SolanaSignTransactionInput[]
  ): Promise<readonly SolanaSignTransactionOutput[]>
}

/** Either the feature itself or a wallet's `features` record holding it. */
export type SolanaSignTransactionFeatureInput =
  | SolanaSignTransactionFeature
  | { readonly 'solana:signTransaction': SolanaSignTransactionFeature }

export function resolveSignTransactionFeature(
  input: SolanaSignTransactionFeatureInput,
): SolanaSignTransactionFeature {
  return 'solana:signTransaction' in input ? input['solana:signTransaction'] : input
}

/** Wallet Standard cluster names and their CAIP-2 ids (first 32 characters of the genesis hash). */
export const walletStandardChains: Readonly<Record<string, string>> = {
  'solana:mainnet': 'solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp',
  'solana:devnet': 'solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1',
}

/**
 * True for a user's refusal: EIP-1193 style code 4001 (Solana wallets reuse it), wallet-adapter's
 * `WalletSignTransactionError`, or a message that says the user rejected. Looks through `cause`.
 */
export function isUserRejection(error: unknown): boolean {
  let current: unknown = error
  for (let depth = 0; depth < 5 && typeof current === 'object' && current !== null; depth++) {
    const candidate = current as { code?: unknown; name?: unknown; message?: unknown; cause?: unknown }
    if (candidate.code === 4001) return true
    if (candidate.name === 'WalletSignTransactionError' || candidate.name === 'UserRejectedRequestError')
      return true
    if (
      typeof candidate.message === 'string' &&
      /user rejected|rejected the request|request rejected/i.test(candidate.message)
    ) {
      return true
    }
    current = candidate.cause
  }
  return false
}

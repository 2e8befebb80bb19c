import {
  createAssociatedTokenAccountIdempotent,
  createMint,
  getAccount,
  getAssociatedTokenAddressSync,
  mintTo,
  TOKEN_PROGRAM_ID,
  TokenAccountNotFoundError,
} from '@solana/spl-token'
import { type Connection, type Keypair, LAMPORTS_PER_SOL, type PublicKey } from '@solana/web3.js'

const confirmOptions = { commitment: 'confirmed' } as const

/**
 * Waits until a signature is confirmed by polling `getSignatureStatuses`, which works the same on
 * the facade and on a real validator (subscriptions are not needed).
 */
export async function confirmSignature(
  connection: Connection,
  signature: string,
  timeoutMs = 30_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    const { value } = await connection.getSignatureStatuses([signature])
    const status = value[0]
    if (status?.err) throw new Error(`Transaction ${signature} failed: ${JSON.stringify(status.err)}`)
    if (status?.confirmationStatus === 'confirmed' || status?.confirmationStatus === 'finalized') return
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  throw new Error(`Transaction ${signature} not confirmed within ${timeoutMs} ms`)
}

/** Airdrops lamports (default 10 SOL) and waits for confirmation. Returns the airdrop signature. */
export async function airdrop(
  connection: Connection,
  to: PublicKey,
  lamports: number = 10 * LAMPORTS_PER_SOL,
): Promise<string> {
  const signature = await connection.requestAirdrop(to, lamports)
  await confirmSignature(connection, signature)
  return signature
}

export interface CreateTestMintOptions {
  /** Default: the payer. */
  mintAuthority?: PublicKey
  /** SPL Token (default) or Token-2022. */
  programId?: PublicKey
}

/** Creates a USDC-like SPL mint (6 decimals by default, no freeze authority). */
export function createTestMint(
  connection: Connection,
  payer: Keypair,
  decimals = 6,
  options: CreateTestMintOptions = {},
): Promise<PublicKey> {
  return createMint(
    connection,
    payer,
    options.mintAuthority ?? payer.publicKey,
    null,
    decimals,
    undefined,
    confirmOptions,
    options.programId ?? TOKEN_PROGRAM_ID,
  )
}

export interface MintTestTokensOptions {
  /** Default: the payer. */
  mintAuthority?: Keypair
  programId?: PublicKey
}

/**
 * Mints `amount` minor units to the owner's associated token account, creating it when missing.
 * Returns the token account.
 */
export async function mintTestTokens(
  connection: Connection,
  payer: Keypair,
  mint: PublicKey,
  owner: PublicKey,
  amount: bigint,
  options: MintTestTokensOptions = {},
): Promise<PublicKey> {
  const programId = options.programId ?? TOKEN_PROGRAM_ID
  const tokenAccount = await createAssociatedTokenAccountIdempotent(
    connection,
    payer,
    mint,
    owner,
    confirmOptions,
    programId,
  )
  await mintTo(
    connection,
    payer,
    mint,
    tokenAccount,
    options.mintAuthority ?? payer,
    amount,
    [],
    confirmOptions,
    programId,
  )
  return tokenAccount
}

/** Balance in minor units of the owner's associated token account; 0n when it does not exist. */
export async function tokenBalance(
  connection: Connection,
  owner: PublicKey,
  mint: PublicKey,
  programId: PublicKey = TOKEN_PROGRAM_ID,
): Promise<bigint> {
  const tokenAccount = getAssociatedTokenAddressSync(mint, owner, true, programId)
  try {
    return (await getAccount(connection, tokenAccount, 'confirmed', programId)).amount
  } catch (error) {
    if (error instanceof TokenAccountNotFoundError) return 0n
    throw error
  }
}

import { createPublicKey, verify } from 'node:crypto'
import {
  createAssociatedTokenAccountIdempotentInstruction,
  createTransferCheckedInstruction,
  getAssociatedTokenAddressSync,
} from '@solana/spl-token'
import {
  ComputeBudgetProgram,
  Keypair,
  PublicKey,
  SystemProgram,
  type TransactionInstruction,
  TransactionMessage,
  TransactionInstruction as TxInstruction,
  VersionedTransaction,
} from '@solana/web3.js'
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest'
import { isPayError } from '../../src/errors/PayError.js'
import {
  airdrop,
  confirmSignature,
  createTestMint,
  mintTestTokens,
  type SolanaValidator,
  startSolanaValidator,
  tokenBalance,
} from '../../test/solana/index.js'
import {
  decodeSolanaTransaction,
  memoProgramIds,
  type SolanaSignTransactionFeature,
  solanaSigner,
  type WalletStandardSolanaAccount,
} from './index.js'

let validator: SolanaValidator
let chainId: string
let mint: PublicKey
const service = Keypair.generate()
const buyer = Keypair.generate()

beforeAll(async () => {
  validator = await startSolanaValidator()
  chainId = validator.caip2
  await airdrop(validator.connection, service.publicKey)
  mint = await createTestMint(validator.connection, service)
  await mintTestTokens(validator.connection, service, mint, buyer.publicKey, 50_000_000n)
})

afterAll(async () => {
  await validator?.stop()
})

afterEach(() => {
  vi.restoreAllMocks()
})

interface BuildOptions {
  version?: 'legacy' | 0
  amount?: bigint
  feePayer?: Keypair
  extra?: TransactionInstruction[]
  blockhash?: string
  /** Sign with the service's key before handing the transaction to the buyer (the service's role). */
  serviceSigns?: boolean
}

/** What the service builds: it pays fees, creates its collection ATA and moves the buyer's tokens to it. */
async function buildPayment(options: BuildOptions = {}): Promise<string> {
  const feePayer = options.feePayer ?? service
  const collection = getAssociatedTokenAddressSync(mint, service.publicKey)
  const instructions = [
    ComputeBudgetProgram.setComputeUnitLimit({ units: 100_000 }),
    createAssociatedTokenAccountIdempotentInstruction(
      feePayer.publicKey,
      collection,
      service.publicKey,
      mint,
    ),
    createTransferCheckedInstruction(
      getAssociatedTokenAddressSync(mint, buyer.publicKey),
      mint,
      collection,
      buyer.publicKey,
      options.amount ?? 1_250_000n,
      6,
    ),
    new TxInstruction({
      programId: new PublicKey(memoProgramIds[0]),
      keys: [],
      data: Buffer.from('pay_123'),
    }),
    ...(options.extra ?? []),
  ]
  const message = new TransactionMessage({
    payerKey: feePayer.publicKey,
    recentBlockhash: options.blockhash ?? (await validator.connection.getLatestBlockhash()).blockhash,
    instructions,
  })
  const tx = new VersionedTransaction(
    options.version === 0 ? message.compileToV0Message() : message.compileToLegacyMessage(),
  )
  if (options.serviceSigns !== false && feePayer === service) tx.sign([service])
  return Buffer.from(tx.serialize()).toString('base64')
}

function request(
  transaction: string,
  overrides: Partial<{ chainId: string; method: string; signal: AbortSignal }> = {},
) {
  return {
    chainId: overrides.chainId ?? chainId,
    method: overrides.method ?? 'solana_signTransaction',
    params: [{ transaction }],
    ...(overrides.signal ? { signal: overrides.signal } : {}),
  }
}

function verifyAll(base64: string): boolean {
  const decoded = decodeSolanaTransaction(base64)
  return decoded.signers.every((signer, i) => {
    const signature = decoded.signatures[i]
    if (!signature) return false
    const key = createPublicKey({
      key: Buffer.concat([Buffer.from('302a300506032b6570032100', 'hex'), new PublicKey(signer).toBuffer()]),
      format: 'der',
      type: 'spki',
    })
    return verify(null, decoded.messageBytes, key, signature)
  })
}

async function rejection(promise: Promise<unknown> | (() => unknown)): Promise<unknown> {
  try {
    await (typeof promise === 'function' ? promise() : promise)
  } catch (error) {
    return error
  }
  throw new Error('expected a rejection')
}

/** A real Wallet Standard account backed by a Keypair, as a browser wallet would expose it. */
function keypairWallet(
  keypair: Keypair,
  behaviour: (tx: VersionedTransaction) => Promise<Uint8Array> | Uint8Array,
) {
  const calls: Uint8Array[] = []
  const account: WalletStandardSolanaAccount = {
    address: keypair.publicKey.toBase58(),
    publicKey: keypair.publicKey.toBytes(),
    chains: ['solana:localnet'],
    features: ['solana:signTransaction'],
  }
  const feature: SolanaSignTransactionFeature = {
    version: '1.0.0',
    supportedTransactionVersions: ['legacy', 0],
    async signTransaction(...inputs) {
      return Promise.all(
        inputs.map(async (input) => {
          calls.push(input.transaction)
          return { signedTransaction: await behaviour(VersionedTransaction.deserialize(input.transaction)) }
        }),
      )
    },
  }
  return { account, feature, calls }
}

describe('solanaSigner with a Keypair', () => {
  it('serves only solana_signTransaction and CAIP-10 accounts', () => {
    const signer = solanaSigner({ keypair: buyer, chains: [chainId] })
    expect(signer.namespace).toBe('solana')
    expect(signer.methods).toEqual(['solana_signTransaction'])
    expect(signer.accounts()).toEqual([`${chainId}:${buyer.publicKey.toBase58()}`])
    expect(Object.keys(signer).filter((key) => /send|broadcast|connection/i.test(key))).toEqual([])
  })

  for (const version of ['legacy', 0] as const) {
    it(`completes a service-built ${version} transaction that the cluster accepts`, async () => {
      const signer = solanaSigner({ keypair: buyer, chains: [chainId] })
      const built = await buildPayment({ version, amount: 1_250_000n })
      const before = decodeSolanaTransaction(built)
      const result = await signer.request(request(built))

      const after = decodeSolanaTransaction(result)
      expect(after.messageBytes).toEqual(before.messageBytes)
      expect(after.signatures[0]).toEqual(before.signatures[0])
      expect(verifyAll(result)).toBe(true)

      const buyerBefore = await tokenBalance(validator.connection, buyer.publicKey, mint)
      const collectionBefore = await tokenBalance(validator.connection, service.publicKey, mint)
      const signature = await validator.connection.sendRawTransaction(Buffer.from(result, 'base64'))
      await confirmSignature(validator.connection, signature)
      expect(await tokenBalance(validator.connection, buyer.publicKey, mint)).toBe(buyerBefore - 1_250_000n)
      expect(await tokenBalance(validator.connection, service.publicKey, mint)).toBe(
        collectionBefore + 1_250_000n,
      )
      expect(await validator.connection.getBalance(buyer.publicKey)).toBe(0)
    })
  }

  it('inspects the transfer it would authorise', async () => {
    const signer = solanaSigner({ keypair: buyer, chains: [chainId] })
    const inspection = signer.inspect(request(await buildPayment({ amount: 777n })))
    expect(inspection).toEqual({
      account: `${chainId}:${buyer.publicKey.toBase58()}`,
      transfers: [
        {
          asset: `${chainId}/token:${mint.toBase58()}`,
          amount: 777n,
          decimals: 6,
          to: `${chainId}:${service.publicKey.toBase58()}`,
        },
      ],
    })
  })

  it('rejects a foreign instruction that involves the signer, and signs nothing', async () => {
    const signer = solanaSigner({ keypair: buyer, chains: [chainId] })
    const drain = SystemProgram.transfer({
      fromPubkey: buyer.publicKey,
      toPubkey: service.publicKey,
      lamports: 1,
    })
    const built = await buildPayment({ extra: [drain] })
    const sign = vi.spyOn(VersionedTransaction.prototype, 'sign')
    const error = await rejection(signer.request(request(built)))
    expect(isPayError(error, 'action_rejected')).toBe(true)
    expect((error as { context: Record<string, unknown> }).context).toMatchObject({ instructionIndex: 4 })
    expect(() => signer.inspect(request(built))).toThrow(/instruction the signer does not allow/)
    expect(sign).not.toHaveBeenCalled()
  })

  it('ignores foreign instructions that do not name the signer', async () => {
    const signer = solanaSigner({ keypair: buyer, chains: [chainId] })
    const own = SystemProgram.transfer({
      fromPubkey: service.publicKey,
      toPubkey: service.publicKey,
      lamports: 1,
    })
    const result = await signer.request(request(await buildPayment({ extra: [own] })))
    expect(verifyAll(result)).toBe(true)
  })

  it('refuses to pay fees unless allowed', async () => {
    const built = await buildPayment({ feePayer: buyer })
    const strict = solanaSigner({ keypair: buyer, chains: [chainId] })
    expect(isPayError(await rejection(strict.request(request(built))), 'action_rejected')).toBe(true)
    const lenient = solanaSigner({ keypair: buyer, chains: [chainId], allowFeePayer: true })
    const decoded = decodeSolanaTransaction(await lenient.request(request(built)))
    expect(decoded.signatures).toHaveLength(1)
    expect(decoded.signatures[0]).not.toBeNull()
  })

  it('rejects other chains, other methods, malformed params and aborted requests', async () => {
    const signer = solanaSigner({ keypair: buyer, chains: [chainId] })
    const built = await buildPayment()
    const otherChain = await rejection(
      signer.request(request(built, { chainId: 'solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp' })),
    )
    expect(isPayError(otherChain, 'action_rejected')).toBe(true)
    const sendMethod = await rejection(
      signer.request(request(built, { method: 'solana_signAndSendTransaction' })),
    )
    expect(isPayError(sendMethod, 'unsupported_method')).toBe(true)
    const bare = await rejection(
      signer.request({ chainId, method: 'solana_signTransaction', params: [built] }),
    )
    expect(isPayError(bare, 'invalid_action')).toBe(true)
    const garbage = await rejection(signer.request(request('not base64!')))
    expect(isPayError(garbage, 'invalid_action')).toBe(true)
    const notMine = Keypair.generate()
    const stranger = solanaSigner({ keypair: notMine, chains: [chainId] })
    expect(isPayError(await rejection(stranger.request(request(built))), 'action_rejected')).toBe(true)
    const controller = new AbortController()
    controller.abort()
    const aborted = await rejection(signer.request(request(built, { signal: controller.signal })))
    expect(isPayError(aborted, 'aborted')).toBe(true)
    expect(() => solanaSigner({ keypair: buyer, chains: ['eip155:1'] })).toThrow(/CAIP-2/)
  })

  it('signs offline: no Connection, no network', async () => {
    const fetchSpy = vi.spyOn(globalThis, 'fetch')
    const signer = solanaSigner({ keypair: buyer, chains: ['solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp'] })
    const built = await buildPayment({ blockhash: Keypair.generate().publicKey.toBase58() })
    const result = await signer.request(
      request(built, { chainId: 'solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp' }),
    )
    expect(verifyAll(result)).toBe(true)
    expect(fetchSpy).not.toHaveBeenCalled()
  })
})

describe('solanaSigner with a Wallet Standard account', () => {
  it('signs through solana:signTransaction and keeps the service signature', async () => {
    // The wallet returns only its own signature; the adapter must not lose the service's.
    const wallet = keypairWallet(buyer, (tx) => {
      const fresh = new VersionedTransaction(tx.message)
      fresh.sign([buyer])
      return fresh.serialize()
    })
    const signer = solanaSigner({ account: wallet.account, feature: wallet.feature, chains: [chainId] })
    expect(signer.accounts()).toEqual([`${chainId}:${buyer.publicKey.toBase58()}`])
    const result = await signer.request(request(await buildPayment({ version: 0, amount: 3_000_000n })))
    expect(wallet.calls).toHaveLength(1)
    expect(verifyAll(result)).toBe(true)
    const signature = await validator.connection.sendRawTransaction(Buffer.from(result, 'base64'))
    await confirmSignature(validator.connection, signature)
  })

  it('accepts the wallet features record and maps Wallet Standard chain names', () => {
    const wallet = keypairWallet(buyer, (tx) => tx.serialize())
    const signer = solanaSigner({
      account: { ...wallet.account, chains: ['solana:mainnet', 'solana:devnet', 'solana:localnet'] },
      feature: { 'solana:signTransaction': wallet.feature },
    })
    expect(signer.accounts()).toEqual([
      `solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp:${buyer.publicKey.toBase58()}`,
      `solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1:${buyer.publicKey.toBase58()}`,
    ])
  })

  it('maps a user rejection to user_rejected', async () => {
    for (const thrown of [
      Object.assign(new Error('User rejected the request.'), { code: 4001 }),
      Object.assign(new Error('Signing failed'), { name: 'WalletSignTransactionError' }),
    ]) {
      const wallet = keypairWallet(buyer, () => {
        throw thrown
      })
      const signer = solanaSigner({ account: wallet.account, feature: wallet.feature, chains: [chainId] })
      const error = await rejection(signer.request(request(await buildPayment())))
      expect(isPayError(error, 'user_rejected')).toBe(true)
      expect((error as Error).cause).toBe(thrown)
    }
  })

  it('refuses a policy violation before the wallet is asked', async () => {
    const wallet = keypairWallet(buyer, (tx) => tx.serialize())
    const signer = solanaSigner({ account: wallet.account, feature: wallet.feature, chains: [chainId] })
    const drain = SystemProgram.transfer({
      fromPubkey: buyer.publicKey,
      toPubkey: service.publicKey,
      lamports: 1,
    })
    const error = await rejection(signer.request(request(await buildPayment({ extra: [drain] }))))
    expect(isPayError(error, 'action_rejected')).toBe(true)
    expect(wallet.calls).toHaveLength(0)
  })

  it('rejects a wallet that changes the message', async () => {
    const wallet = keypairWallet(buyer, async () => {
      const changed = decodeSolanaTransaction(await buildPayment({ amount: 9_999n, serviceSigns: false }))
      const tx = VersionedTransaction.deserialize(changed.bytes)
      tx.sign([buyer])
      return tx.serialize()
    })
    const signer = solanaSigner({ account: wallet.account, feature: wallet.feature, chains: [chainId] })
    const error = await rejection(signer.request(request(await buildPayment())))
    expect(isPayError(error, 'action_rejected')).toBe(true)
  })

  it('honours an abort while the wallet is open', async () => {
    const wallet = keypairWallet(buyer, () => new Promise<Uint8Array>(() => {}))
    const signer = solanaSigner({ account: wallet.account, feature: wallet.feature, chains: [chainId] })
    const controller = new AbortController()
    const pending = signer.request(request(await buildPayment(), { signal: controller.signal }))
    setTimeout(() => controller.abort(), 10)
    expect(isPayError(await rejection(pending), 'aborted')).toBe(true)
  })
})

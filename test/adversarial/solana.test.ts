import { createPublicKey, verify } from 'node:crypto'
import {
  createApproveInstruction,
  createAssociatedTokenAccountIdempotentInstruction,
  createTransferCheckedInstruction,
  createTransferInstruction,
  getAssociatedTokenAddressSync,
  TOKEN_2022_PROGRAM_ID,
  TOKEN_PROGRAM_ID,
} from '@solana/spl-token'
import {
  AddressLookupTableAccount,
  ComputeBudgetProgram,
  Keypair,
  PublicKey,
  SystemProgram,
  TransactionInstruction,
  TransactionMessage,
  VersionedTransaction,
} from '@solana/web3.js'
import { afterEach, beforeEach, describe, expect, it, type MockInstance, vi } from 'vitest'
import { solanaInspector, solanaSigner } from '../../adapters/solana/index.js'
import { walletConnectSigner } from '../../adapters/walletconnect/index.js'
import { isPayError } from '../../src/errors/PayError.js'
import {
  type Outcome,
  option,
  payAgainst,
  rpc,
  solanaWalletConnectSession,
  succeeded,
  walletStandardWallet,
} from './support.js'

// The gateway is the attacker (issue 13), on every Solana signer path: a Keypair, a Wallet Standard
// wallet and a WalletConnect wallet, all holding one real key whose every signing call is counted
// (web3.js `VersionedTransaction.sign`, which each of them uses to sign).

const chain = 'solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp'
const buyer = Keypair.generate()
const service = Keypair.generate()
const merchant = Keypair.generate().publicKey
const mint = Keypair.generate().publicKey
const asset = `${chain}/token:${mint.toBase58()}`
const account = `${chain}:${buyer.publicKey.toBase58()}`

type SolanaPath = 'Keypair' | 'Wallet Standard' | 'WalletConnect'
const solanaPaths: readonly SolanaPath[] = ['Keypair', 'Wallet Standard', 'WalletConnect']

let signCalls: MockInstance
beforeEach(() => {
  signCalls = vi.spyOn(VersionedTransaction.prototype, 'sign')
})
afterEach(() => signCalls.mockRestore())

function signerOn(path: SolanaPath, policy: { allowFeePayer?: boolean; maxFeeLamports?: bigint } = {}) {
  if (path === 'Keypair') return solanaSigner({ keypair: buyer, chains: [chain], ...policy })
  if (path === 'Wallet Standard') {
    return solanaSigner({ ...walletStandardWallet(buyer, chain), chains: [chain], ...policy })
  }
  return walletConnectSigner({
    ...solanaWalletConnectSession(buyer, chain),
    namespace: 'solana',
    inspect: solanaInspector({ address: buyer.publicKey.toBase58(), chains: [chain], ...policy }),
  })
}

interface Build {
  feePayer?: PublicKey
  version?: 'legacy' | 0
  lookupTables?: AddressLookupTableAccount[]
}

function transaction(instructions: TransactionInstruction[], build: Build = {}): string {
  const message = new TransactionMessage({
    payerKey: build.feePayer ?? service.publicKey,
    recentBlockhash: Keypair.generate().publicKey.toBase58(),
    instructions,
  })
  const compiled =
    build.version === 0 || build.lookupTables
      ? message.compileToV0Message(build.lookupTables)
      : message.compileToLegacyMessage()
  return Buffer.from(new VersionedTransaction(compiled).serialize()).toString('base64')
}

const sign = (tx: string) => rpc(chain, 'solana_signTransaction', [{ transaction: tx }])

function transferChecked(amount: bigint, { decimals = 6, program = TOKEN_PROGRAM_ID } = {}) {
  return createTransferCheckedInstruction(
    getAssociatedTokenAddressSync(mint, buyer.publicKey, false, program),
    mint,
    getAssociatedTokenAddressSync(mint, merchant, false, program),
    buyer.publicKey,
    amount,
    decimals,
    [],
    program,
  )
}

function pay(path: SolanaPath, value: bigint, tx: string, policy = {}) {
  return payAgainst(
    {
      options: () => ({ body: { options: [option('opt_sol', account, asset, value, [sign(tx)])] } }),
      confirm: () => ({ body: succeeded }),
    },
    [signerOn(path, policy)],
    'opt_sol',
  )
}

async function expectRefused(outcome: Promise<Outcome>, code: string, context: Record<string, unknown> = {}) {
  const { error, result } = await outcome
  expect(result, 'the payment must not complete').toBeUndefined()
  expect(isPayError(error), String(error)).toBe(true)
  expect(error).toMatchObject({ code, context: expect.objectContaining(context) })
  expect(signCalls).not.toHaveBeenCalled()
}

/** The buyer's signature in the transaction the wallet confirmed, checked against its message. */
function expectSignedByBuyer({ gateway }: Outcome): void {
  const [signed] = (gateway.calls.confirm![0] as { results: string[] }).results
  const tx = VersionedTransaction.deserialize(Buffer.from(signed!, 'base64'))
  const slot = tx.message.staticAccountKeys.findIndex((key) => key.equals(buyer.publicKey))
  const key = createPublicKey({
    key: Buffer.concat([Buffer.from('302a300506032b6570032100', 'hex'), buyer.publicKey.toBuffer()]),
    format: 'der',
    type: 'spki',
  })
  expect(verify(null, tx.message.serialize(), key, tx.signatures[slot]!)).toBe(true)
}

describe.each(solanaPaths)('hostile gateway, Solana signer via %s', (path) => {
  it('control: signs a transferChecked within the amount (legacy, v0, Token-2022) and the signature verifies', async () => {
    for (const tx of [
      transaction([transferChecked(1_000_000n)]),
      transaction([transferChecked(1_000_000n)], { version: 0 }),
      transaction([transferChecked(999n, { program: TOKEN_2022_PROGRAM_ID })], { version: 0 }),
    ]) {
      const outcome = await pay(path, 1_000_000n, tx)
      expect(outcome.result).toMatchObject({ status: 'succeeded' })
      expectSignedByBuyer(outcome)
    }
    expect(signCalls).toHaveBeenCalledTimes(3)
  })

  it('class 6: with allowFeePayer, refuses a compute budget that could cost more than the fee bound', async () => {
    const policy = { allowFeePayer: true }
    const priced = (units: number | undefined, microLamports: bigint) =>
      transaction(
        [
          ...(units === undefined ? [] : [ComputeBudgetProgram.setComputeUnitLimit({ units })]),
          ComputeBudgetProgram.setComputeUnitPrice({ microLamports }),
          transferChecked(1n),
        ],
        { feePayer: buyer.publicKey },
      )
    await expectRefused(pay(path, 1n, priced(1_400_000, 10n ** 12n), policy), 'action_rejected', {
      limit: '1000000',
    })
    // No unit limit: the runtime's default per instruction still bounds the fee.
    await expectRefused(pay(path, 1n, priced(undefined, 10n ** 9n), policy), 'action_rejected')
    const fair = await pay(path, 1n, priced(200_000, 1_000n), policy)
    expect(fair.result).toMatchObject({ status: 'succeeded' })
    expectSignedByBuyer(fair)
    const strict = pay(path, 1n, priced(200_000, 1_000n), { ...policy, maxFeeLamports: 5_000n })
    await expect(strict).resolves.toMatchObject({
      error: expect.objectContaining({ code: 'action_rejected' }),
    })
  })

  it('class 7: refuses a transfer from a multisig that lists the wallet as a co-signer (Token and Token-2022)', async () => {
    for (const program of [TOKEN_PROGRAM_ID, TOKEN_2022_PROGRAM_ID]) {
      for (const cosigners of [[buyer.publicKey], [Keypair.generate().publicKey, buyer.publicKey]]) {
        const treasury = Keypair.generate().publicKey
        const multisig = Keypair.generate().publicKey
        const ix = createTransferCheckedInstruction(
          getAssociatedTokenAddressSync(mint, treasury, false, program),
          mint,
          getAssociatedTokenAddressSync(mint, Keypair.generate().publicKey, false, program),
          multisig,
          10n ** 15n,
          6,
          cosigners,
          program,
        )
        await expectRefused(pay(path, 1n, transaction([ix])), 'action_rejected', {
          reason: 'signer is an extra account of a transfer',
        })
      }
    }
  })

  it('class 3 on Solana: refuses a transferChecked the wallet authorises as the delegate of another account', async () => {
    // Found by the independent review: the wallet, approved as delegate of a third party's token
    // account, would have signed a transfer of that account's tokens within the option amount.
    for (const program of [TOKEN_PROGRAM_ID, TOKEN_2022_PROGRAM_ID]) {
      const ix = createTransferCheckedInstruction(
        getAssociatedTokenAddressSync(mint, Keypair.generate().publicKey, false, program),
        mint,
        getAssociatedTokenAddressSync(mint, merchant, false, program),
        buyer.publicKey,
        1n,
        6,
        [],
        program,
      )
      await expectRefused(pay(path, 1n, transaction([ix], { version: 0 })), 'action_rejected', {
        reason: 'signer authorises a transfer from another account',
      })
    }
  })

  it('refuses a transfer the wallet authorises that also hands its signature on as an extra account', async () => {
    // Found by the independent review: Token-2022 passes the accounts after the authority to the
    // mint's transfer hook with their signer flag, so the hook program could spend the wallet's
    // signature (a System transfer of its lamports, another token's transfer).
    for (const program of [TOKEN_PROGRAM_ID, TOKEN_2022_PROGRAM_ID]) {
      const ix = transferChecked(1n, { program })
      ix.keys.push({ pubkey: buyer.publicKey, isSigner: true, isWritable: true })
      await expectRefused(pay(path, 1n, transaction([ix], { version: 0 })), 'action_rejected', {
        reason: 'signer is an extra account of a transfer',
      })
    }
  })

  it('refuses other token instructions, lookup-table accounts, durable nonces and misstated decimals', async () => {
    const source = getAssociatedTokenAddressSync(mint, buyer.publicKey)
    const sink = getAssociatedTokenAddressSync(mint, merchant)
    const other = [
      createTransferInstruction(source, sink, buyer.publicKey, 1n),
      createApproveInstruction(source, Keypair.generate().publicKey, buyer.publicKey, 10n ** 15n),
    ]
    for (const ix of other) {
      await expectRefused(pay(path, 1_000_000n, transaction([ix])), 'action_rejected', {
        reason: 'unrecognised instruction involves the signer',
      })
    }
    // The mint and destination load from a lookup table: the transfer cannot be read, so it is not signed.
    const table = new AddressLookupTableAccount({
      key: Keypair.generate().publicKey,
      state: {
        deactivationSlot: 2n ** 64n - 1n,
        lastExtendedSlot: 0,
        lastExtendedSlotStartIndex: 0,
        addresses: [mint, sink],
      },
    })
    await expectRefused(
      pay(path, 1_000_000n, transaction([transferChecked(1n)], { lookupTables: [table] })),
      'action_rejected',
    )
    const nonce = SystemProgram.nonceAdvance({
      noncePubkey: Keypair.generate().publicKey,
      authorizedPubkey: service.publicKey,
    })
    await expectRefused(pay(path, 1_000_000n, transaction([nonce, transferChecked(1n)])), 'action_rejected', {
      field: 'recentBlockhash',
    })
    await expectRefused(
      pay(path, 1_000_000n, transaction([transferChecked(1n, { decimals: 0 })])),
      'action_rejected',
      {
        decimals: 0,
        shown: 6,
      },
    )
    await expectRefused(
      pay(path, 1_000_000n, transaction([transferChecked(1_000_001n)])),
      'action_rejected',
      {
        limit: '1000000',
      },
    )
    // A fee payer the signer did not agree to be, and a token account it would fund.
    await expectRefused(
      pay(path, 1n, transaction([transferChecked(1n)], { feePayer: buyer.publicKey })),
      'action_rejected',
    )
    const funded = createAssociatedTokenAccountIdempotentInstruction(buyer.publicKey, sink, merchant, mint)
    await expectRefused(pay(path, 1n, transaction([funded, transferChecked(1n)])), 'action_rejected', {
      reason: 'signer funds a token account',
    })
  })

  // Issue 27, causes 5-7: every decoder reads instruction data as the runtime does (a prefix), and
  // the fee bound counts every lamport the runtime charges the fee payer, success or failure.
  describe('the runtime’s reading of instruction data and fees', () => {
    const withTrailing = (ix: TransactionInstruction, ...extra: number[]) =>
      new TransactionInstruction({ ...ix, data: Buffer.concat([ix.data, Buffer.from(extra)]) })
    const feePayer = { allowFeePayer: true }
    const asPayer = (instructions: TransactionInstruction[]) =>
      transaction([...instructions, transferChecked(1n)], { feePayer: buyer.publicKey })

    it('cause 5: an AdvanceNonceAccount with trailing bytes is a durable nonce all the same', async () => {
      const nonce = SystemProgram.nonceAdvance({
        noncePubkey: Keypair.generate().publicKey,
        authorizedPubkey: service.publicKey,
      })
      for (const extra of [[0], [1, 2, 3], Array(40).fill(255)]) {
        await expectRefused(
          pay(path, 1_000_000n, transaction([withTrailing(nonce, ...extra), transferChecked(1n)])),
          'action_rejected',
          { field: 'recentBlockhash' },
        )
      }
    })

    it('cause 6: compute-budget prices and limits with trailing bytes count as the runtime reads them', async () => {
      const price = ComputeBudgetProgram.setComputeUnitPrice({ microLamports: 5n * 10n ** 9n })
      const limit = ComputeBudgetProgram.setComputeUnitLimit({ units: 1_400_000 })
      const micro = ComputeBudgetProgram.setComputeUnitPrice({ microLamports: 1_000_000n })
      for (const tx of [
        asPayer([withTrailing(price, 0)]),
        asPayer([withTrailing(limit, 9), withTrailing(micro, 0, 0)]),
      ]) {
        await expectRefused(pay(path, 1n, tx, feePayer), 'action_rejected', { limit: '1000000' })
      }
    })

    it('cause 6, next variants: truncated, unknown, deprecated and repeated compute-budget instructions', async () => {
      const price = ComputeBudgetProgram.setComputeUnitPrice({ microLamports: 1n })
      const budget = (data: number[]) =>
        new TransactionInstruction({ programId: price.programId, keys: [], data: Buffer.from(data) })
      for (const [ix, reason] of [
        [budget([3, 1, 0, 0]), 'unreadable compute-budget instruction'],
        [budget([2, 1]), 'unreadable compute-budget instruction'],
        [budget([0, 1, 0, 0, 0, 1, 0, 0, 0]), 'unreadable compute-budget instruction'],
        [budget([9]), 'unreadable compute-budget instruction'],
        [budget([]), 'unreadable compute-budget instruction'],
      ] as const) {
        // Refused whoever pays: the wallet cannot say what the runtime makes of it.
        await expectRefused(pay(path, 1n, transaction([ix, transferChecked(1n)])), 'action_rejected', {
          reason,
        })
      }
      await expectRefused(
        pay(path, 1n, asPayer([price, withTrailing(price, 1)]), feePayer),
        'action_rejected',
        {
          reason: 'compute-budget unitPrice set twice',
        },
      )
    })

    it('cause 7: signatures declared by Ed25519, secp256k1 and secp256r1 precompiles are fees', async () => {
      for (const program of [
        'Ed25519SigVerify111111111111111111111111111',
        'KeccakSecp256k11111111111111111111111111111',
        'Secp256r1SigVerify1111111111111111111111111',
      ]) {
        const precompile = new TransactionInstruction({
          programId: new PublicKey(program),
          keys: [],
          data: Buffer.from([255]),
        })
        // 1 + 255 signatures = 1.28 M lamports, over the 0.001 SOL default, and charged on failure too.
        await expectRefused(pay(path, 1n, asPayer([precompile]), feePayer), 'action_rejected', {
          maxFeeLamports: '1280000',
        })
      }
    })

    it('cause 2: an option for another Solana account, or for the wallet’s on another cluster, is not signed', async () => {
      const tx = transaction([transferChecked(1n)])
      const devnet = 'solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1'
      for (const optionAccount of [
        `${chain}:${merchant.toBase58()}`,
        `${devnet}:${buyer.publicKey.toBase58()}`,
      ]) {
        const outcome = payAgainst(
          {
            options: () => ({ body: { options: [option('opt_sol', optionAccount, asset, 1n, [sign(tx)])] } }),
            confirm: () => ({ body: succeeded }),
          },
          [signerOn(path)],
          'opt_sol',
        )
        await expectRefused(outcome, 'action_rejected', { optionAccount })
      }
    })

    it('control: the same instructions, read exactly, within the bound are signed as fee payer', async () => {
      const outcome = await pay(
        path,
        1n,
        asPayer([
          ComputeBudgetProgram.setComputeUnitLimit({ units: 200_000 }),
          ComputeBudgetProgram.setComputeUnitPrice({ microLamports: 1_000n }),
        ]),
        feePayer,
      )
      expect(outcome.result).toMatchObject({ status: 'succeeded' })
      expectSignedByBuyer(outcome)
    })
  })
})

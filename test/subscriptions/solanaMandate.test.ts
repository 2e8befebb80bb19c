import {
  createApproveCheckedInstruction,
  createApproveInstruction,
  createTransferCheckedInstruction,
  getAssociatedTokenAddressSync,
  TOKEN_PROGRAM_ID,
} from '@solana/spl-token'
import {
  ComputeBudgetProgram,
  Keypair,
  type PublicKey,
  type TransactionInstruction,
  TransactionMessage,
  VersionedTransaction,
} from '@solana/web3.js'
import { afterEach, beforeEach, describe, expect, it, type MockInstance, vi } from 'vitest'
import { solanaSigner } from '../../adapters/solana/index.js'
import type { PaymentOption, SubscriptionTerms } from '../../src/contract/gateway.js'
import { isPayError, type PayError } from '../../src/errors/PayError.js'
import { createMandates } from '../../src/subscriptions/index.js'
import { option, payAgainst, rpc, succeeded } from '../adversarial/support.js'
import { seededRandom } from '../differential/random.js'

// Issue 41, the hostile gateway on Solana: an SPL `ApproveChecked` (a subscription's mandate) is signed
// only inside a subscription option whose terms bound it, in a transaction holding nothing else but
// compute-budget instructions, the service paying the fee. The key's every signing call is counted.

const chain = 'solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp'
const otherChain = 'solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1'
const buyer = Keypair.generate()
const service = Keypair.generate()
const charger = Keypair.generate().publicKey
const attacker = Keypair.generate().publicKey
const mint = Keypair.generate().publicKey
const otherMint = Keypair.generate().publicKey
const asset = `${chain}/token:${mint.toBase58()}`
const account = `${chain}:${buyer.publicKey.toBase58()}`
const now = Math.floor(Date.now() / 1000)
const perPeriod = 5_000_000n

const terms: SubscriptionTerms = {
  subscriptionId: 'sub_sol',
  asset,
  amountPerPeriod: perPeriod.toString(),
  interval: 'week',
  intervalCount: 2,
  periods: 6,
  endAt: now + 100 * 86_400,
  spender: `${chain}:${charger.toBase58()}`,
}

let signCalls: MockInstance
beforeEach(() => {
  signCalls = vi.spyOn(VersionedTransaction.prototype, 'sign')
})
afterEach(() => signCalls.mockRestore())

const ata = (owner: PublicKey, m = mint) => getAssociatedTokenAddressSync(m, owner, true, TOKEN_PROGRAM_ID)

function approveChecked(g: {
  mint?: PublicKey
  delegate?: PublicKey
  amount?: bigint
  decimals?: number
  source?: PublicKey
}) {
  const m = g.mint ?? mint
  return createApproveCheckedInstruction(
    g.source ?? ata(buyer.publicKey, m),
    m,
    g.delegate ?? charger,
    buyer.publicKey,
    g.amount ?? perPeriod * 6n,
    g.decimals ?? 6,
  )
}

function transaction(
  instructions: TransactionInstruction[],
  feePayer: PublicKey = service.publicKey,
): string {
  const message = new TransactionMessage({
    payerKey: feePayer,
    recentBlockhash: Keypair.generate().publicKey.toBase58(),
    instructions,
  }).compileToV0Message()
  return Buffer.from(new VersionedTransaction(message).serialize()).toString('base64')
}

function subscriptionOption(
  tx: string,
  subscription: SubscriptionTerms | null = terms,
  chainId = chain,
): PaymentOption {
  const base = option('sub', account, asset, perPeriod, [
    rpc(chainId, 'solana_signTransaction', [{ transaction: tx }]),
  ])
  return subscription ? { ...base, subscription } : base
}

const delegates = [`${chain}:${charger.toBase58()}`]

async function pay(
  o: PaymentOption,
  policy: { delegates?: string[]; allowFeePayer?: boolean } = { delegates },
) {
  const signer = solanaSigner({ keypair: buyer, chains: [chain, otherChain], ...policy })
  return payAgainst(
    { options: () => ({ body: { options: [o] } }), confirm: () => ({ body: succeeded }) },
    [signer],
    o.id,
    { mandates: createMandates({ signers: [signer] }) },
  )
}

async function expectRefused(
  o: PaymentOption,
  rule?: string,
  policy?: { delegates?: string[] },
): Promise<PayError> {
  const { error, gateway } = await pay(o, policy)
  expect(isPayError(error, 'action_rejected'), String(error)).toBe(true)
  if (rule) expect((error as PayError).context.rule).toBe(rule)
  expect(signCalls).not.toHaveBeenCalled()
  expect(gateway.calls.confirm).toBeUndefined()
  return error as PayError
}

describe('Solana subscription mandate (SPL ApproveChecked) against a hostile gateway', () => {
  it('signs a delegation the terms bound (with compute-budget instructions), the service paying the fee', async () => {
    const tx = transaction([
      ComputeBudgetProgram.setComputeUnitLimit({ units: 20_000 }),
      ComputeBudgetProgram.setComputeUnitPrice({ microLamports: 1 }),
      approveChecked({}),
    ])
    const { result, error } = await pay(subscriptionOption(tx))
    expect(result, String(error)).toMatchObject({ status: 'succeeded' })
    expect(signCalls).toHaveBeenCalledTimes(1)
  })

  const cases: [string, () => PaymentOption, string | undefined][] = [
    [
      'a delegation larger than price x periods',
      () => subscriptionOption(transaction([approveChecked({ amount: perPeriod * 6n + 1n })])),
      'mandate_amount',
    ],
    [
      'a delegation of u64 max',
      () => subscriptionOption(transaction([approveChecked({ amount: 2n ** 64n - 1n })])),
      'mandate_amount',
    ],
    [
      'a delegation to another allow-listed delegate',
      () => subscriptionOption(transaction([approveChecked({ delegate: attacker })])),
      'mandate_spender',
    ],
    [
      'a delegation of another mint',
      () => subscriptionOption(transaction([approveChecked({ mint: otherMint })])),
      'mandate_asset',
    ],
    [
      'a delegation stating other decimals',
      () => subscriptionOption(transaction([approveChecked({ decimals: 9 })])),
      'mandate_decimals',
    ],
    [
      'a delegation of another token account',
      () => subscriptionOption(transaction([approveChecked({ source: ata(attacker) })])),
      undefined,
    ],
    [
      'a delegation on another chain than the terms’',
      () => subscriptionOption(transaction([approveChecked({})]), terms, otherChain),
      undefined,
    ],
    [
      'a delegation with a transfer besides',
      () =>
        subscriptionOption(
          transaction([
            approveChecked({}),
            createTransferCheckedInstruction(
              ata(buyer.publicKey),
              mint,
              ata(attacker),
              buyer.publicKey,
              1n,
              6,
            ),
          ]),
        ),
      'mandate_transaction',
    ],
    [
      'a delegation the signer pays the fee for',
      () => subscriptionOption(transaction([approveChecked({})], buyer.publicKey)),
      undefined,
    ],
    [
      'a plain (unchecked) SPL Approve',
      () =>
        subscriptionOption(
          transaction([createApproveInstruction(ata(buyer.publicKey), charger, buyer.publicKey, 1n)]),
        ),
      undefined,
    ],
    [
      'an ApproveChecked slipped into a one-time payment’s option',
      () => subscriptionOption(transaction([approveChecked({})]), null),
      'mandate_outside_subscription',
    ],
    [
      'terms whose delegate nobody allow-listed',
      () =>
        subscriptionOption(transaction([approveChecked({ delegate: attacker })]), {
          ...terms,
          spender: `${chain}:${attacker.toBase58()}`,
        }),
      'mandate_delegate_not_allowed',
    ],
    [
      'terms with absurdly many periods',
      () => subscriptionOption(transaction([approveChecked({})]), { ...terms, periods: 5_000 }),
      'terms_periods',
    ],
    [
      'terms already ended',
      () => subscriptionOption(transaction([approveChecked({})]), { ...terms, endAt: now - 60 }),
      'terms_ended',
    ],
  ]
  it.each(cases)('refuses %s, nothing signed', async (_name, build, rule) => {
    const o = build()
    // Both the terms' delegate and the attacker are allow-listed where the case is not about the allow-list.
    const policy =
      rule === 'mandate_delegate_not_allowed'
        ? { delegates }
        : { delegates: [...delegates, `${chain}:${attacker.toBase58()}`] }
    await expectRefused(o, rule, policy)
  })

  it('with terms that set only an end date, the delegation is bounded by the periods that fit before it', async () => {
    // Every 2 weeks from now, before now + 30 days: now, +14 d, +28 d: three charges.
    const open = { ...terms, periods: null, endAt: now + 30 * 86_400 }
    const at = (amount: bigint) => subscriptionOption(transaction([approveChecked({ amount })]), open)
    const { result } = await pay(at(perPeriod * 3n))
    expect(result).toMatchObject({ status: 'succeeded' })
    signCalls.mockClear()
    await expectRefused(at(perPeriod * 3n + 1n), 'mandate_amount')
  })

  it('generated delegations: signed exactly when the terms bound them (an independent judge)', async () => {
    const random = seededRandom(4141)
    let accepted = 0
    let refused = 0
    for (let i = 0; i < 30; i++) {
      const pick = <T>(values: readonly T[]) =>
        random.int(2) === 0 ? values[0]! : values[random.int(values.length)]!
      const g = {
        mint: pick([mint, otherMint]),
        delegate: pick([charger, attacker]),
        amount: pick([perPeriod * 6n, perPeriod, perPeriod * 6n + 1n, 0n, 2n ** 64n - 1n]),
        decimals: pick([6, 0, 9]),
      }
      const within =
        g.mint === mint && g.delegate === charger && g.amount <= perPeriod * 6n && g.decimals === 6
      signCalls.mockClear()
      const { result, error } = await pay(subscriptionOption(transaction([approveChecked(g)])), {
        delegates: [...delegates, `${chain}:${attacker.toBase58()}`],
      })
      if (within) {
        expect(result, `${i}: ${String(error)}`).toMatchObject({ status: 'succeeded' })
        accepted++
      } else {
        expect(isPayError(error, 'action_rejected'), `${i}: ${String(error)}`).toBe(true)
        expect(signCalls).not.toHaveBeenCalled()
        refused++
      }
    }
    console.info(`ApproveChecked mutants: seed 4141, 30 delegations, ${accepted} signed, ${refused} refused`)
    expect(accepted).toBeGreaterThan(0)
    expect(refused).toBeGreaterThan(0)
  })
})

import { encodeFunctionData, erc20Abi, type Hex, maxUint256, recoverAddress } from 'viem'
import { privateKeyToAccount } from 'viem/accounts'
import { describe, expect, it } from 'vitest'
import { evmSigner } from '../../adapters/evm/index.js'
import {
  type Permit2Allowance,
  permit2Address,
  permit2AllowanceHash,
  permit2AllowanceTypedData,
} from '../../protocol/evm/permit2.js'
import { guardActions } from '../../src/actions/guard.js'
import { createSignerRegistry } from '../../src/actions/registry.js'
import { routeActions } from '../../src/actions/route.js'
import type { PaymentOption, SubscriptionTerms, WalletRpcAction } from '../../src/contract/gateway.js'
import { isPayError, type PayError } from '../../src/errors/PayError.js'
import { createReviewer, type PaymentReview } from '../../src/review/index.js'
import { createMandates, mandateDeadlineSlackS } from '../../src/subscriptions/index.js'
import { option, payAgainst, rpc, succeeded } from '../adversarial/support.js'
import { anvilPrivateKeys } from '../anvil.js'
import { countingAccount } from '../countingAccount.js'
import { seededRandom } from '../differential/random.js'

// Issue 41, the hostile gateway on EVM: a subscription option's Permit2 `PermitSingle` is signed only
// when the terms bound it, and a one-time option never carries one. The gateway serves each case over
// HTTP to the real flow with a real key whose every signature is counted; a refused case ends in a
// PayError `action_rejected` and zero signatures, an accepted one recovers to the owner.

const chain = 'eip155:8453'
const payerKey = anvilPrivateKeys[1]
const payer = privateKeyToAccount(payerKey).address
const service = privateKeyToAccount(anvilPrivateKeys[2]).address
const attacker = privateKeyToAccount(anvilPrivateKeys[5]).address
const token = '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913' as const
const otherToken = '0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48' as const
const asset = `${chain}/erc20:${token}`
const account = `${chain}:${payer}`
const now = Math.floor(Date.now() / 1000)
const perPeriod = 10_000_000n

const terms: SubscriptionTerms = {
  subscriptionId: 'sub_1',
  asset,
  amountPerPeriod: perPeriod.toString(),
  interval: 'month',
  intervalCount: 1,
  periods: 12,
  endAt: now + 400 * 86_400,
  spender: `${chain}:${service}`,
}

function honestGrant(option: Pick<PaymentOption, 'expiresAt'>): Permit2Allowance {
  return {
    chainId: 8453,
    token,
    amount: perPeriod * 12n,
    expiration: BigInt(terms.endAt),
    nonce: 0n,
    spender: service,
    sigDeadline: BigInt(option.expiresAt + 600),
  }
}

const grantAction = (grant: Permit2Allowance, chainId = chain) =>
  rpc(chainId, 'eth_signTypedData_v4', [payer, JSON.stringify(permit2AllowanceTypedData(grant))])

function subscriptionOption(
  actions: (o: PaymentOption) => PaymentOption['actions'],
  subscription: SubscriptionTerms | null = terms,
): PaymentOption {
  const base = option('sub', account, asset, perPeriod, [])
  const built = { ...base, ...(subscription && { subscription }) }
  return { ...built, actions: actions(built) }
}

function signer(spenders = [`${chain}:${permit2Address}`, `${chain}:${service}`]) {
  const counted = countingAccount(payerKey)
  return {
    signer: evmSigner({
      account: counted.account,
      chains: { [chain]: { rpcUrl: 'http://127.0.0.1:9' } },
      spenders,
    }),
    calls: counted.calls,
  }
}

async function pay(o: PaymentOption, spenders?: string[]) {
  const { signer: s, calls } = signer(spenders)
  const reviews: PaymentReview[] = []
  const outcome = await payAgainst(
    { options: () => ({ body: { options: [o] } }), confirm: () => ({ body: succeeded }) },
    [s],
    o.id,
    {
      mandates: createMandates({ signers: [s] }),
      review: createReviewer(),
      onReview: (r) => reviews.push(r) > 0,
    },
  )
  return { ...outcome, calls: calls(), reviews }
}

async function expectRefused(o: PaymentOption, rule?: string, spenders?: string[]): Promise<PayError> {
  const { error, calls, gateway } = await pay(o, spenders)
  expect(isPayError(error, 'action_rejected'), String(error)).toBe(true)
  if (rule) expect((error as PayError).context.rule).toBe(rule)
  expect(calls).toBe(0)
  expect(gateway.calls.confirm).toBeUndefined()
  return error as PayError
}

describe('EVM subscription mandate (Permit2 PermitSingle) against a hostile gateway', () => {
  it('signs a grant the terms bound, and the signature recovers to the owner from permit2AllowanceHash', async () => {
    let grant: Permit2Allowance | undefined
    const o = subscriptionOption((built) => {
      grant = honestGrant(built)
      return [grantAction(grant)]
    })
    const { result, calls, gateway, reviews } = await pay(o)
    expect(result).toMatchObject({ status: 'succeeded' })
    expect(calls).toBe(1)
    // The review describes the mandate from the decoded grant, never from the gateway's texts.
    expect(reviews[0]!.actions[0]).toMatchObject({
      intent: 'mandate',
      moves: [],
      mandate: {
        asset: { id: asset },
        amount: perPeriod * 12n,
        spender: terms.spender,
        expiration: terms.endAt,
      },
    })
    const [signature] = (gateway.calls.confirm![0] as { results: Hex[] }).results
    expect(await recoverAddress({ hash: permit2AllowanceHash(grant!), signature: signature! })).toBe(payer)
  })

  it('signs the one-time approve of Permit2 for the mandate total with the grant (one movement, counted once)', async () => {
    // The guard alone (it signs nothing): the approve is a transaction the absent node would have to send.
    const approve = rpc(chain, 'eth_sendTransaction', [
      {
        from: payer,
        to: token,
        data: encodeFunctionData({
          abi: erc20Abi,
          functionName: 'approve',
          args: [permit2Address, perPeriod * 12n],
        }),
      },
    ])
    const ok = subscriptionOption((built) => [approve, grantAction(honestGrant(built))])
    const { signer: s, calls } = signer()
    const guard = (o: PaymentOption) =>
      guardActions(routeActions(createSignerRegistry([s]), o.actions as WalletRpcAction[], o.subscription), {
        accounts: [account],
        account,
        amount: o.amount,
        expiresAt: o.expiresAt,
        ...(o.subscription && { subscription: o.subscription }),
        mandates: createMandates({ signers: [s] }),
      })
    await expect(guard(ok)).resolves.toMatchObject({ total: 0n })
    // An approve of Permit2 beyond the mandate: the excess counts against the option's amount (one period).
    const bigger = rpc(chain, 'eth_sendTransaction', [
      {
        from: payer,
        to: token,
        data: encodeFunctionData({
          abi: erc20Abi,
          functionName: 'approve',
          args: [permit2Address, maxUint256],
        }),
      },
    ])
    const tooMuch = subscriptionOption((built) => [bigger, grantAction(honestGrant(built))])
    await expect(guard(tooMuch)).rejects.toMatchObject({ code: 'action_rejected' })
    expect(calls()).toBe(0)
  })

  const cases: [string, (g: Permit2Allowance) => Permit2Allowance, string | undefined][] = [
    ['a grant larger than price x periods', (g) => ({ ...g, amount: g.amount + 1n }), 'mandate_amount'],
    ['a grant of uint160 max', (g) => ({ ...g, amount: 2n ** 160n - 1n }), 'mandate_amount'],
    [
      'a grant expiring after the end',
      (g) => ({ ...g, expiration: g.expiration + 1n }),
      'mandate_expiration',
    ],
    [
      'a grant to another (allow-listed) spender',
      (g) => ({ ...g, spender: permit2Address }),
      'mandate_spender',
    ],
    ['a grant to a spender nobody allow-listed', (g) => ({ ...g, spender: attacker }), undefined],
    ['a grant of another token', (g) => ({ ...g, token: otherToken }), 'mandate_asset'],
    [
      'a grant submittable long after the option expires',
      (g) => ({ ...g, sigDeadline: g.sigDeadline - 600n + BigInt(mandateDeadlineSlackS) + 1n }),
      'mandate_deadline',
    ],
  ]
  it.each(cases)('refuses %s, nothing signed', async (_name, mutate, rule) => {
    await expectRefused(
      subscriptionOption((built) => [grantAction(mutate(honestGrant(built)))]),
      rule,
    )
  })

  it('refuses a grant on another chain than the terms’ asset, nothing signed', async () => {
    const other = { ...terms, asset: `eip155:1/erc20:${token}`, spender: `eip155:1:${service}` }
    const o = subscriptionOption(
      (built) => [grantAction({ ...honestGrant(built), chainId: 1 }, 'eip155:1')],
      other,
    )
    // The option's account is on Base: the key on another chain does not sign for it.
    await expectRefused({ ...o, amount: { ...o.amount, unit: `caip19/${other.asset}` } })
    // Terms and action on Base, the grant's domain on mainnet: not bound to the action's chain.
    await expectRefused(
      subscriptionOption((built) => {
        const typed = permit2AllowanceTypedData(honestGrant(built))
        const elsewhere = { ...typed, domain: { ...typed.domain, chainId: 1 } }
        return [rpc(chain, 'eth_signTypedData_v4', [payer, JSON.stringify(elsewhere)])]
      }),
    )
  })

  it('refuses a PermitSingle slipped into a one-time payment’s option, nothing signed', async () => {
    const error = await expectRefused(subscriptionOption((built) => [grantAction(honestGrant(built))], null))
    expect(error.shortMessage).toMatch(/allowance is not signed/)
  })

  const lies: [string, Partial<SubscriptionTerms>, string | undefined][] = [
    ['terms whose spender nobody allow-listed', { spender: `${chain}:${attacker}` }, undefined],
    ['terms with absurdly many periods', { periods: 1_000_000 }, 'terms_periods'],
    [
      'terms without periods ending in 200 years (daily)',
      { periods: null, interval: 'day', endAt: now + 200 * 365 * 86_400 },
      'terms_periods',
    ],
    ['terms already ended', { endAt: now - 1 }, 'terms_ended'],
    ['terms charging nothing per period', { amountPerPeriod: '0' }, 'terms_amount'],
  ]
  it.each(lies)('refuses %s, nothing signed', async (_name, lie, rule) => {
    const lying = { ...terms, ...lie }
    const o = subscriptionOption(
      (built) => [
        grantAction({
          ...honestGrant(built),
          spender: lying.spender.split(':')[2] as Hex,
          expiration: BigInt(Math.max(0, Math.min(lying.endAt, terms.endAt))),
        }),
      ],
      lying,
    )
    await expectRefused(o, rule)
  })

  it('generated grants: the guard signs exactly those within the terms (an independent judge), nothing else', async () => {
    const random = seededRandom(41)
    const base = subscriptionOption(() => [])
    const honest = honestGrant(base)
    const tokens = [token, otherToken] as const
    const spenders = [service, attacker, permit2Address] as const
    const total = perPeriod * 12n
    let accepted = 0
    let refused = 0
    for (let i = 0; i < 40; i++) {
      // The honest value half the time, else one of the others: enough grants get through to be judged.
      const pick = <T>(values: readonly T[]) =>
        random.int(2) === 0 ? values[0]! : values[random.int(values.length)]!
      const grant: Permit2Allowance = {
        ...honest,
        token: pick(tokens),
        spender: pick(spenders),
        amount: pick([total, total - 1n, total + 1n, perPeriod, 2n ** 160n - 1n]),
        expiration: pick([honest.expiration, honest.expiration + 1n, 0n, BigInt(now + 86_400)]),
        sigDeadline: pick([
          honest.sigDeadline,
          BigInt(base.expiresAt + mandateDeadlineSlackS),
          BigInt(base.expiresAt + mandateDeadlineSlackS + 1),
        ]),
        nonce: BigInt(random.int(3)),
      }
      // The judge: what the terms allow, written from the wire contract, not from the guard's code.
      const within =
        grant.token === token &&
        grant.spender === service &&
        grant.amount <= total &&
        grant.expiration <= BigInt(terms.endAt) &&
        grant.sigDeadline <= BigInt(base.expiresAt + mandateDeadlineSlackS)
      const o = { ...base, actions: [grantAction(grant)] }
      const { result, error, calls, gateway } = await pay(o, [
        `${chain}:${service}`,
        `${chain}:${permit2Address}`,
      ])
      if (within) {
        expect(result, `${i}: ${String(error)}`).toMatchObject({ status: 'succeeded' })
        const [signature] = (gateway.calls.confirm![0] as { results: Hex[] }).results
        expect(await recoverAddress({ hash: permit2AllowanceHash(grant), signature: signature! })).toBe(payer)
        accepted++
      } else {
        expect(isPayError(error, 'action_rejected'), `${i}: ${String(error)}`).toBe(true)
        expect(calls).toBe(0)
        refused++
      }
    }
    console.info(`PermitSingle mutants: seed 41, 40 grants, ${accepted} signed, ${refused} refused`)
    expect(accepted).toBeGreaterThan(0)
    expect(refused).toBeGreaterThan(0)
  })
})

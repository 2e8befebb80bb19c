import { Keypair } from '@solana/web3.js'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { solanaJobKinds } from '../../src/server/chains/solana/index.js'
import type { Fault } from '../rpcFaults.js'
import {
  confirmedPayment,
  onChain as onChainIn,
  paymentRow as paymentRowIn,
  type SolanaLive,
  startSolanaLive,
  until,
} from './live.js'

/**
 * Solana faults, one focused test each, on the litesvm cluster behind the fault proxy. The chain is
 * configured with `commitment: finalized`; litesvm reports every landed transaction finalized at once,
 * so only the proxy can show the service a transaction that is merely `confirmed`.
 */
const amount = 12_500_000n

let live: SolanaLive

beforeAll(async () => {
  live = await startSolanaLive({ chain: { commitment: 'finalized' } })
})

afterAll(async () => {
  await live?.close()
})

/** The node reports every known signature as only `confirmed` (not yet rooted). */
const onlyConfirmed: Fault = {
  kind: 'rewrite',
  fn(answer) {
    const result = answer.result as { context: unknown; value: Array<Record<string, unknown> | null> }
    return {
      ...answer,
      result: { ...result, value: result.value.map((s) => s && { ...s, confirmationStatus: 'confirmed' }) },
    }
  },
}

const onChain = (signature: string) => onChainIn(live, signature)
const paymentRow = (paymentId: string) => paymentRowIn(live, paymentId)

/** Lets the job read the (rewritten) status several more times. */
async function statusReadsPass(reads = 5) {
  const seen = live.proxy.calls('getSignatureStatuses')
  await until(() => live.proxy.calls('getSignatureStatuses') >= seen + reads, 'more status reads')
}

describe('Solana commitment finalized', () => {
  it('a payment and a settlement the node reports only confirmed stay unrecorded (payment processing, settlement pending) until reported finalized, then each is recorded once', async () => {
    const buyer = await live.newBuyer()
    const merchantOwner = Keypair.generate()
    const merchantId = await live.createMerchant(merchantOwner.publicKey)
    const before = await live.balance(buyer.publicKey)
    const { paymentId, signature } = await confirmedPayment(live, buyer, merchantId)

    live.proxy.inject('getSignatureStatuses', onlyConfirmed)
    const payer = live.startRunner({ kinds: [solanaJobKinds.broadcast] })
    await until(() => onChain(signature), 'the payment to land')
    await statusReadsPass()
    expect(await live.balance(buyer.publicKey)).toBe(before - amount)
    const waiting = await paymentRow(paymentId)
    expect(waiting.status).toBe('processing')
    expect(waiting.settlement_status).toBeNull()
    live.proxy.clear('getSignatureStatuses')
    const paid = await live.waitForPayment(paymentId, merchantId, (p) => p.status !== 'processing')
    await payer.stop()
    expect(paid.status).toBe('succeeded')
    expect(paid.info.txId).toBe(signature)
    expect(paid.settlement).toEqual({ successful: null })

    live.proxy.inject('getSignatureStatuses', onlyConfirmed)
    const settler = live.startRunner({ kinds: [solanaJobKinds.settle] })
    try {
      await until(
        async () => (await live.balance(merchantOwner.publicKey)) === amount,
        'the settlement to land',
      )
      await statusReadsPass()
      expect((await paymentRow(paymentId)).settlement_status).toBe('pending')
      live.proxy.clear('getSignatureStatuses')
      const settled = await live.waitForPayment(
        paymentId,
        merchantId,
        (p) => p.settlement?.successful != null,
      )
      const recorded = await live.t.db
        .selectFrom('solana_transactions')
        .selectAll()
        .where('payment_id', '=', paymentId)
        .where('purpose', '=', 'settlement')
        .execute()
      expect(recorded).toHaveLength(1)
      expect(settled.settlement.successful.txId).toBe(recorded[0]!.signature)
      expect(await live.balance(merchantOwner.publicKey)).toBe(amount)
    } finally {
      live.proxy.clear()
      await settler.stop()
    }
  })
})

/** A payment confirmed and waiting for its broadcast, with the counts before it. */
async function confirmedForBroadcast() {
  const buyer = await live.newBuyer()
  const merchantId = await live.createMerchant()
  const before = await live.balance(buyer.publicKey)
  const confirmed = await confirmedPayment(live, buyer, merchantId)
  return {
    ...confirmed,
    buyer,
    merchantId,
    before,
    sends: live.proxy.calls('sendTransaction'),
    executed: live.executed(),
  }
}

describe('Solana dropped broadcasts', () => {
  it('a sendTransaction dropped after answering its signature is sent again while the blockhash is valid, and the payment lands once', async () => {
    const { buyer, merchantId, before, paymentId, signature, sends, executed } = await confirmedForBroadcast()
    live.proxy.inject('sendTransaction', { kind: 'drop' }, { times: 1 })
    const runner = live.startRunner()
    try {
      const paid = await live.waitForPayment(paymentId, merchantId, (p) => p.status !== 'processing')
      expect(paid.status).toBe('succeeded')
      expect(paid.info.txId).toBe(signature)
      expect(live.proxy.calls('sendTransaction')).toBeGreaterThanOrEqual(sends + 2)
      expect(live.executed()).toBe(executed + 1)
      expect(await live.balance(buyer.publicKey)).toBe(before - amount)
    } finally {
      await runner.stop()
    }
  })

  it('a sendTransaction dropped on every send until its blockhash expires ends the payment failed with nothing moved, and nothing is signed anew', async () => {
    const { buyer, merchantId, before, paymentId, signature, sends, executed } = await confirmedForBroadcast()
    live.proxy.inject('sendTransaction', { kind: 'drop' })
    const runner = live.startRunner()
    try {
      await until(() => live.proxy.calls('sendTransaction') >= sends + 2, 'a second send')
      await live.validator.expireBlockhash()
      const ended = await live.waitForPayment(paymentId, merchantId, (p) => p.status !== 'processing')
      expect(ended.status).toBe('failed')
      expect(ended.info).toBeNull()
      expect(await onChain(signature)).toBe(false)
      expect(live.executed()).toBe(executed)
      expect(await live.balance(buyer.publicKey)).toBe(before)
      const recorded = await live.t.db
        .selectFrom('solana_transactions')
        .select(['signature', 'state'])
        .where('payment_id', '=', paymentId)
        .execute()
      expect(recorded).toEqual([{ signature, state: 'dropped' }])
    } finally {
      live.proxy.clear()
      await runner.stop()
    }
  })
})

/**
 * Answers as a node far behind would: no status for anything recent, an older slot and height, and
 * every newer blockhash unknown (so "invalid").
 */
const behind = (slots: number): Record<string, Fault> => ({
  getSignatureStatuses: {
    kind: 'rewrite',
    fn: (answer) => {
      const result = answer.result as { context: { slot: number }; value: unknown[] }
      return {
        ...answer,
        result: { context: { slot: result.context.slot - slots }, value: result.value.map(() => null) },
      }
    },
  },
  isBlockhashValid: {
    kind: 'rewrite',
    fn: (answer) => {
      const result = answer.result as { context: { slot: number } }
      return { ...answer, result: { context: { slot: result.context.slot - slots }, value: false } }
    },
  },
  getEpochInfo: {
    kind: 'rewrite',
    fn: (answer) => {
      const result = answer.result as { absoluteSlot: number; blockHeight: number }
      return {
        ...answer,
        result: {
          ...result,
          absoluteSlot: result.absoluteSlot - slots,
          blockHeight: result.blockHeight - slots,
        },
      }
    },
  },
})

describe('Solana node behind', () => {
  it('a landed payment read through a node behind (no status, blockhash "invalid") is never declared dropped; it succeeds once a current node answers', async () => {
    const { buyer, merchantId, before, paymentId, signature } = await confirmedForBroadcast()
    for (const [method, fault] of Object.entries(behind(400))) live.proxy.inject(method, fault)
    const proofs = live.proxy.calls('getEpochInfo')
    const runner = live.startRunner()
    try {
      await until(() => onChain(signature), 'the payment to land')
      // Several sweeps see it unseen with an "expired" blockhash and ask for proof; none is given.
      await until(() => live.proxy.calls('getEpochInfo') >= proofs + 2, 'two proofs asked for')
      const waiting = await paymentRow(paymentId)
      expect(waiting.status).toBe('processing')
      const recorded = await live.t.db
        .selectFrom('solana_transactions')
        .select('state')
        .where('signature', '=', signature)
        .executeTakeFirstOrThrow()
      expect(recorded.state).not.toBe('dropped')
      live.proxy.clear()
      const paid = await live.waitForPayment(paymentId, merchantId, (p) => p.status !== 'processing')
      expect(paid.status).toBe('succeeded')
      expect(paid.info.txId).toBe(signature)
      expect(await live.balance(buyer.publicKey)).toBe(before - amount)
    } finally {
      live.proxy.clear()
      await runner.stop()
    }
  })
})

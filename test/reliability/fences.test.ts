import { type Address, encodeFunctionData, erc20Abi, type Hex } from 'viem'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { EvmChain } from '../../src/server/chains/evm/chain.js'
import { createEvmSender, type EvmSender } from '../../src/server/chains/evm/sender.js'
import { sendOnce } from '../../src/server/chains/evm/transactions.js'
import { recordTransaction } from '../../src/server/chains/solana/store.js'
import { type Fence, FenceLost } from '../../src/server/jobs/fence.js'
import { claimJobs, enqueueJob } from '../../src/server/jobs/queue.js'
import { failPayment } from '../../src/server/payments/lifecycle.js'
import { mintTestToken } from '../anvil.js'
import { createEvmEnv, type EvmEnv, fastRuntime, usdc } from '../evm/support.js'

/**
 * A worker paused past its job lease (a GC pause, a frozen VM, SIGSTOP) resumes in the middle of a step
 * that another worker has since taken over and finished. Whatever it had prepared, it must move nothing:
 * its claim is its fencing token (src/server/jobs/fence.ts). The process-level version (SIGSTOP of a real
 * `caipay serve --worker-only`) is the conservation suite's; this one stops a step at a chosen point.
 */
describe('a step that resumes after its claim was taken over', () => {
  let env: EvmEnv
  let chain: EvmChain
  let sender: EvmSender
  beforeAll(async () => {
    env = await createEvmEnv()
    chain = fastRuntime(env).chains[0]!
    sender = createEvmSender(env.t.db, chain)
    // The collection address's tokens: what a settlement or refund pays out of.
    await mintTestToken(env.anvil.rpcUrl, env.token, env.collection, usdc(50))
  })
  afterAll(() => env?.close())

  const now = new Date()
  const later = new Date(now.getTime() + 120_000)

  /** A payment with a claimed job, the claim taken over by a second worker: both fences. */
  async function claimedTwice(kind: string): Promise<{ paymentId: string; first: Fence; second: Fence }> {
    const { paymentId } = await env.pay('100')
    await enqueueJob(env.t.db, { kind, paymentId, now })
    const [first] = await claimJobs(env.t.db, { kinds: [kind], now })
    return {
      paymentId,
      first: { jobId: first!.id, generation: first!.attempts },
      second: await claimAgain(kind),
    }
  }
  async function claimAgain(kind: string): Promise<Fence> {
    const [again] = await claimJobs(env.t.db, { kinds: [kind], now: later })
    return { jobId: again!.id, generation: again!.attempts }
  }

  /** A payout of 1 USDC to `to` as a job step sends it, paused at its estimate until `resume` resolves. */
  function payout(paymentId: string, to: Address, fence: Fence | undefined, resume?: Promise<void>) {
    const args = [to, usdc(1)] as const
    return sendOnce({
      db: env.t.db,
      chain,
      sender,
      paymentId,
      purpose: 'settle',
      to: env.token,
      data: encodeFunctionData({ abi: erc20Abi, functionName: 'transfer', args }),
      estimateGas: async () => {
        await resume
        return chain.publicClient.estimateGas({
          account: chain.executor,
          to: env.token,
          data: encodeFunctionData({ abi: erc20Abi, functionName: 'transfer', args }),
        })
      },
      ...(fence ? { fence } : {}),
    })
  }

  async function pausedThenResumed(fenced: boolean) {
    const { paymentId, first, second } = await claimedTwice(fenced ? 'test.fenced' : 'test.unfenced')
    const recipient = privateKeyToAccount(generatePrivateKey()).address
    let resume!: () => void
    // The first worker is stopped inside its step, after it found nothing sent and before it recorded.
    const paused = payout(paymentId, recipient, fenced ? first : undefined, new Promise((r) => (resume = r)))
    // The second worker, holding the claim now, sends the payout and it is mined.
    const { hash } = await payout(paymentId, recipient, second)
    await chain.publicClient.waitForTransactionReceipt({ hash: hash as Hex })
    resume()
    const resumed = await paused.then(
      () => 'sent',
      (error: unknown) => error,
    )
    await chain.publicClient.request({ method: 'evm_mine', params: [] } as never)
    const rows = await env.t.db
      .selectFrom('evm_transactions')
      .select('hash')
      .where('payment_id', '=', paymentId)
      .execute()
    return { resumed, rows, received: await env.balance(recipient) }
  }

  it('records nothing and so sends nothing: the payout is made once', async () => {
    const { resumed, rows, received } = await pausedThenResumed(true)
    expect(resumed).toBeInstanceOf(FenceLost)
    expect(rows).toHaveLength(1)
    expect(received).toBe(usdc(1))
  })

  it('(the same pause without a fence pays twice: what the fence is for)', async () => {
    const { resumed, rows, received } = await pausedThenResumed(false)
    expect(resumed).toBe('sent')
    expect(rows).toHaveLength(2)
    expect(received).toBe(usdc(2))
  })

  it('Solana: a transaction recorded under a lost claim is refused, under the claim that holds it is kept', async () => {
    const { paymentId, first, second } = await claimedTwice('test.solana')
    const tx = (signature: string) => ({
      signature,
      paymentId,
      purpose: 'settlement' as const,
      chainId: 'solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp',
      raw: 'AA==',
      blockhash: '11111111111111111111111111111111',
      lastValidBlockHeight: 1,
    })
    await expect(recordTransaction(env.t.db, tx('stale'), new Date(), first)).rejects.toBeInstanceOf(
      FenceLost,
    )
    await recordTransaction(env.t.db, tx('current'), new Date(), second)
    const rows = await env.t.db
      .selectFrom('solana_transactions')
      .select('signature')
      .where('payment_id', '=', paymentId)
      .execute()
    expect(rows.map((r) => r.signature)).toEqual(['current'])
  })

  it('a step that lost its claim cannot fail the payment (its verdict may be stale), the holder can', async () => {
    const { paymentId, first, second } = await claimedTwice('test.fail')
    await env.t.db.updateTable('payments').set({ status: 'processing' }).where('id', '=', paymentId).execute()
    // E.g. it resumed, estimated its relay and found the authorization used: by the new holder's relay.
    expect(
      await failPayment(env.t.db, { paymentId, failureCode: 'authorization_rejected', fence: first }),
    ).toBe(undefined)
    const still = await env.t.db
      .selectFrom('payments')
      .select('status')
      .where('id', '=', paymentId)
      .executeTakeFirstOrThrow()
    expect(still.status).toBe('processing')
    const failed = await failPayment(env.t.db, {
      paymentId,
      failureCode: 'authorization_rejected',
      fence: second,
    })
    expect(failed?.status).toBe('failed')
  })
})

import { randomBytes } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createGatewayEnv, type GatewayEnv, statementsOf } from './support.js'

/**
 * What one test-mode payment costs the database, step by step, as the bench's wallets run it
 * (bench/gatewayFlow.ts): every query a pooled client sends is one round trip. The counts guard the
 * flow's fixed-shape, few-statement design against a change that quietly adds statements per request.
 */
let env: GatewayEnv
beforeAll(async () => {
  env = await createGatewayEnv()
})
afterAll(() => env.t.close())

describe('round trips of the test-mode gateway flow', () => {
  it('options, fetch, confirm and status each take a fixed, small number of statements', async () => {
    const account = `eip155:8453:0x${randomBytes(20).toString('hex')}`
    // Warm the auth cache and the prepared statements, as a running server has them.
    for (let i = 0; i < 2; i++) {
      const id = await env.pay()
      const options = await env.gw('POST', id, '/options', { accounts: [account] })
      const optionId = options.json.options[0].id
      await env.gw('POST', id, '/fetch', { optionId, data: '' })
      const results = [`0x${randomBytes(65).toString('hex')}`]
      await env.gw('POST', id, '/confirm', { optionId, results }, { 'idempotency-key': `warm-${id}` })
    }
    const id = await env.pay()
    const options = await statementsOf(() => env.gw('POST', id, '/options', { accounts: [account] }))
    expect(options.result.statusCode, options.result.body).toBe(200)
    const optionId = options.result.json.options[0].id
    const fetched = await statementsOf(() => env.gw('POST', id, '/fetch', { optionId, data: '' }))
    expect(fetched.result.statusCode, fetched.result.body).toBe(200)
    const results = fetched.result.json.actions.map(() => `0x${randomBytes(65).toString('hex')}`)
    const confirm = await statementsOf(() =>
      env.gw('POST', id, '/confirm', { optionId, results }, { 'idempotency-key': `flow-${id}` }),
    )
    expect(confirm.result.json).toEqual({ status: 'succeeded', isFinal: true, pollInMs: null })
    const status = await statementsOf(() => env.gw('GET', id, '/status'))
    expect(status.result.json).toMatchObject({ status: 'succeeded', isFinal: true })
    const counts = {
      options: options.statements.length,
      fetch: fetched.statements.length,
      confirm: confirm.statements.length,
      status: status.statements.length,
    }
    // options: one statement, quoted on the facts this process kept when it created the payment
    // (payments/paymentFacts.ts), reads the payment with its merchant and stores the quotes while it is payable.
    // fetch: the payment with its option and the merchant's settlement for the option's asset.
    // confirm: one statement, planned on what the fetch read (gateway/fetchedReads.ts), takes the key's
    // lock, locks the payment in its state, checks the option and the merchant's settlement are as read,
    // stores the answer and moves the payment -> processing -> succeeded (-> settled), with no transaction
    // around it.
    // status: none, as the confirm that finished the payment left its final answer with this process
    // (payments/finalStatuses.ts); a payment still open is read (below).
    expect(counts).toEqual({ options: 1, fetch: 1, confirm: 1, status: 0 })
    const open = await env.pay()
    const openStatus = await statementsOf(() => env.gw('GET', open, '/status'))
    expect(openStatus.result.json).toMatchObject({ status: 'requires_action', isFinal: false })
    expect(openStatus.statements).toEqual(['named'])
    // Every statement runs prepared, and none opens a transaction.
    const unprepared = [options, fetched, confirm, status]
      .flatMap((s) => s.statements)
      .filter((s) => s !== 'named')
    expect(unprepared).toEqual([])
  })
})

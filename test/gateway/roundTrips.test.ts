import { randomBytes } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createGatewayEnv, type GatewayEnv, statementsOf } from './support.js'

/**
 * What one test-mode payment costs the database, step by step, as the bench's wallets run it
 * (bench/gatewayFlow.ts): every query a pooled client sends is one round trip. The list guards the
 * flow against a change that quietly adds statements per request.
 */
let env: GatewayEnv
beforeAll(async () => {
  // A cached credential outlives the test however slow the machine (with fast paths on).
  env = await createGatewayEnv({ config: { authCacheMs: 60_000 } })
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
    // With fast paths off, every request first looks its credential up (authCache.ts).
    const lookup = env.t.app.fastPath.enabled ? [] : ['sql']
    const kinds = (statements: string[]) =>
      statements
        .map((s) => (s === 'named' ? 'named' : /^\s*(begin|commit)\b/i.test(s) ? s.trim() : 'sql'))
        .slice(lookup.length)
    // options: the payment (named), then every quote in one named insert.
    expect(kinds(options.statements)).toEqual(['named', 'named'])
    // fetch: the payment with its option and the merchant's settlement for the option's asset.
    expect(kinds(fetched.statements)).toEqual(['named'])
    // confirm under a key: one transaction that takes the key's lock and reads its record, reads the
    // payment and option, moves the payment -> processing -> succeeded (-> settled) in one statement
    // (changePaymentInSteps), and stores the answer.
    expect(kinds(confirm.statements)).toEqual(['begin', 'named', 'named', 'sql', 'named', 'commit'])
    // status: one named read; the final answer is then kept by the fast path (payments/finalStatuses.ts),
    // unless fast paths are off.
    expect(kinds(status.statements)).toEqual(['named'])
    const again = await statementsOf(() => env.gw('GET', id, '/status'))
    expect(again.result.json).toEqual(status.result.json)
    expect(kinds(again.statements)).toEqual(env.t.app.fastPath.enabled ? [] : ['named'])
    const open = await env.pay()
    const openStatus = await statementsOf(() => env.gw('GET', open, '/status'))
    expect(openStatus.result.json).toMatchObject({ status: 'requires_action', isFinal: false })
    expect(kinds(openStatus.statements)).toEqual(['named'])
  })
})

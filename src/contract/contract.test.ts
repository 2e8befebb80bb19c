import { describe, expect, it } from 'vitest'
import * as z from 'zod/mini'
import { endpoints } from './endpoints.js'
import { serviceErrorCodes, serviceErrorStatus } from './errors.js'
import { samples } from './samples.js'
import { finalStatuses, isFinalStatus, paymentStatuses } from './statuses.js'

describe.each(samples)('%s', (_name, schema, valid, invalid) => {
  it.each(valid.map((v) => [v]))('accepts %j', (value) => {
    expect(z.safeParse(schema, value).error).toBeUndefined()
  })
  it.each(invalid.map((v) => [v]))('rejects %j', (value) => {
    expect(z.safeParse(schema, value).success).toBe(false)
  })
})

describe('registry', () => {
  it('lists every spec row once with a unique method and path', () => {
    const keys = Object.values(endpoints).map((e) => `${e.method} ${e.path}`)
    expect(new Set(keys).size).toBe(keys.length)
    // Spec rows 1-23, the sandbox simulate endpoint, the eight webhook-endpoint routes, and the refunds'
    // read, list and sandbox simulate, the partner's balances, manual capture's capture and void, push
    // payments' deposits list and sandbox pushed transfer, and subscriptions' five (create, list, read,
    // cancel, sandbox simulate) with the three of test clocks.
    expect(keys).toHaveLength(24 + 8 + 3 + 1 + 2 + 2 + 5 + 3)
  })
  it('maps every spec error code to an HTTP status', () => {
    expect(serviceErrorCodes).toContain('settlement_asset_conflict')
    expect(serviceErrorCodes).toContain('webhook_endpoint_not_found')
    expect(serviceErrorCodes).toContain('settlement_not_found')
    expect(serviceErrorCodes).toContain('refund_not_found')
    expect(serviceErrorCodes).toContain('subscription_not_found')
    expect(serviceErrorCodes).toContain('test_clock_not_found')
    expect(serviceErrorCodes).toHaveLength(42)
    for (const code of serviceErrorCodes) expect(serviceErrorStatus[code]).toBeGreaterThanOrEqual(400)
  })
  it('turns every schema into JSON Schema for the OpenAPI document', () => {
    for (const endpoint of Object.values(endpoints)) {
      for (const schema of [endpoint.response, 'body' in endpoint ? endpoint.body : undefined]) {
        if (schema)
          expect(() => z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' })).not.toThrow()
      }
    }
  })
})

describe('payment statuses', () => {
  // isFinalStatus states the rule without the list (the wallet core carries one fewer array): both must agree.
  it('isFinalStatus holds for exactly the listed final statuses', () => {
    expect(paymentStatuses.filter(isFinalStatus).sort()).toEqual([...finalStatuses].sort())
  })
})

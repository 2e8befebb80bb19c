import type { TestClock } from '../../contract/subscription.js'
import type { AuthContext } from '../context.js'
import { fail, validationError } from '../errors.js'
import { newId } from '../ids.js'
import { unixSeconds } from '../payments/views.js'
import type { Db } from '../store/db.js'
import type { TestClockRow } from './schema.js'

/**
 * Test clocks (test mode, like Stripe's): a subscription created on one lives in the clock's time, which
 * stands still until advanced; advancing charges every period that falls due on the way, in order.
 */

export function assertTestMode(auth: Pick<AuthContext, 'mode'>): void {
  if (auth.mode !== 'test') fail('not_sandbox_api_key', 'Use a test API key (svc_test_...) for test clocks.')
}

export function testClockJson(row: TestClockRow): TestClock {
  return { id: row.id, frozenTime: unixSeconds(row.frozen_time), createdAt: row.created_at.toISOString() }
}

export async function createTestClock(
  db: Db,
  input: { auth: Pick<AuthContext, 'partnerId' | 'mode'>; frozenTime: number | undefined; now: Date },
): Promise<TestClockRow> {
  assertTestMode(input.auth)
  const frozen = input.frozenTime === undefined ? input.now : new Date(input.frozenTime * 1000)
  return db
    .insertInto('test_clocks')
    .values({
      id: newId('testClock'),
      partner_id: input.auth.partnerId,
      frozen_time: frozen,
      created_at: input.now,
      updated_at: input.now,
    })
    .returningAll()
    .executeTakeFirstOrThrow()
}

/** The partner's clock, `404 test_clock_not_found` otherwise; `forUpdate` locks it (an advance). */
export async function findTestClock(
  db: Db,
  auth: Pick<AuthContext, 'partnerId' | 'mode'>,
  clockId: string,
  options: { forUpdate?: boolean } = {},
): Promise<TestClockRow> {
  assertTestMode(auth)
  let q = db
    .selectFrom('test_clocks')
    .selectAll()
    .where('id', '=', clockId)
    .where('partner_id', '=', auth.partnerId)
  if (options.forUpdate) q = q.forUpdate()
  const row = await q.executeTakeFirst()
  if (!row) fail('test_clock_not_found', 'Test clock not found.', { testClockId: clockId })
  return row
}

/** A clock only moves forward. */
export function checkAdvance(clock: TestClockRow, to: number): Date {
  const target = new Date(to * 1000)
  if (target.getTime() < clock.frozen_time.getTime()) {
    throw validationError([{ path: 'body.frozenTime', message: 'A test clock only moves forward.' }])
  }
  return target
}

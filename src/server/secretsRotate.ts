import type { SecretBox } from './secrets.js'
import { type Db, inTransaction } from './store/db.js'

export interface ResealCounts {
  webhookSecrets: number
  storedAnswers: number
}

/**
 * Re-seals every secret at rest under the box's current key: webhook signing secrets (the current one
 * and the previous one of a rotation's overlap) and stored idempotent answers that are in plain text
 * or sealed under a previous key. Safe to run while servers run (a row is rewritten with a value that
 * opens to the same text) and again (what is current is left alone). Afterwards the previous keys can
 * be dropped from the configuration.
 */
export async function resealSecrets(db: Db, box: SecretBox): Promise<ResealCounts> {
  return inTransaction(db, async (trx) => {
    const reseal = (stored: string) => box.seal(box.open(stored))
    let webhookSecrets = 0
    const endpoints = await trx
      .selectFrom('webhook_endpoints')
      .select(['id', 'secret', 'previous_secret'])
      .forUpdate()
      .execute()
    for (const row of endpoints) {
      const secretStale = !box.isCurrent(row.secret)
      const previousStale = row.previous_secret !== null && !box.isCurrent(row.previous_secret)
      if (!secretStale && !previousStale) continue
      await trx
        .updateTable('webhook_endpoints')
        .set({
          secret: secretStale ? reseal(row.secret) : row.secret,
          previous_secret:
            row.previous_secret !== null && previousStale ? reseal(row.previous_secret) : row.previous_secret,
        })
        .where('id', '=', row.id)
        .execute()
      webhookSecrets += Number(secretStale) + Number(previousStale)
    }
    let storedAnswers = 0
    const answers = await trx
      .selectFrom('idempotency_keys')
      .select(['partner_id', 'mode', 'key', 'response_body'])
      .where('response_body', 'is not', null)
      .forUpdate()
      .execute()
    for (const row of answers) {
      if (row.response_body === null || box.isCurrent(row.response_body)) continue
      await trx
        .updateTable('idempotency_keys')
        .set({ response_body: reseal(row.response_body) })
        .where('partner_id', '=', row.partner_id)
        .where('mode', '=', row.mode)
        .where('key', '=', row.key)
        .execute()
      storedAnswers++
    }
    return { webhookSecrets, storedAnswers }
  })
}

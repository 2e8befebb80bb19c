import type { FastifyInstance } from 'fastify'
import * as z from 'zod/mini'
import { isBase58PublicKey } from '../../caip/base58.js'
import type { AssetConfig, ChainDriver } from '../chains/types.js'
import { bodyValidationError, fail, paramsError } from '../errors.js'
import { findGatewayPayment, type GatewayPaymentRow } from '../gateway/payment.js'
import { tokenAmountFor } from '../gateway/quote.js'
import { pushReference } from '../payments/push.js'
import { unixSeconds } from '../payments/views.js'

/**
 * Solana Pay transaction requests (docs/push-payments.md): the `solana:https://...` link of a live Solana
 * payment's push option. Public, like the checkout page (a wallet that scanned the QR code holds no
 * credentials): the payment id in the link names what it already shows. `GET` answers the label and icon
 * the wallet shows; `POST {account}` the transaction the gateway builds for that account, which the
 * wallet signs and sends itself; the push scan finds it by the payment's reference key.
 */

export const SolanaPayParams = z.object({
  id: z.string().check(z.maxLength(64)),
  /** The token's mint address: the asset of the push option the link belongs to. */
  token: z.string().check(z.maxLength(64)),
})

export const SolanaPayBody = z.strictObject({
  account: z
    .string()
    .check(
      z.regex(/^[1-9A-HJ-NP-Za-km-z]{32,44}$/),
      z.refine(isBase58PublicKey, 'Expected a base58 Solana public key (32 bytes).'),
    ),
})

export const SolanaPayLabel = z.object({
  /** The merchant's name. */
  label: z.string(),
  /** An absolute URL of an image the wallet shows next to the label. */
  icon: z.string(),
})

export const SolanaPayTransaction = z.object({
  /** Base64 wire bytes: the service's fee-payer signature present, the account's missing. */
  transaction: z.string(),
  message: z.string(),
})

/** The codes the transaction request answers beyond the request pipeline's (openapi.ts). */
export const solanaPayErrors = ['payment_not_found', 'params_validation'] as const
export const solanaPayPostErrors = [...solanaPayErrors, 'invalid_state', 'payment_expired'] as const

const solanaPayPath = '/v1/solana-pay/:id/:token'

export async function solanaPayRoutes(app: FastifyInstance): Promise<void> {
  /** The payment and the Solana driver and asset of the link's token, or `{code, message}` errors. */
  async function resolve(rawParams: unknown): Promise<{
    payment: GatewayPaymentRow
    driver: ChainDriver
    asset: AssetConfig
  }> {
    const params = z.safeParse(SolanaPayParams, rawParams)
    if (!params.success) throw paramsError('path', 'Expected a payment id and a token mint.')
    const payment = await findGatewayPayment(app.db, params.data.id, null, app.now())
    // Only live payments have push options (test mode moves nothing on a chain).
    if (payment.mode !== 'live') fail('payment_not_found', `Payment ${params.data.id} not found.`)
    for (const driver of app.chainDrivers ?? []) {
      if (driver.namespace !== 'solana' || !driver.transactionRequest) continue
      const asset = driver.assets.find(
        (a) => a.push !== false && a.id.endsWith(`/token:${params.data.token}`),
      )
      if (asset) return { payment, driver, asset }
    }
    throw paramsError('path.token', 'Not the mint of an asset this payment can be pushed in.')
  }

  app.get(solanaPayPath, async (request, reply) => {
    const { payment } = await resolve(request.params)
    const icon = payment.merchant_icon_url ?? `${app.config.publicBaseUrl}/pay/${payment.id}/icon.svg`
    return reply
      .header('cache-control', 'no-store')
      .send({ label: payment.merchant_name, icon } satisfies z.output<typeof SolanaPayLabel>)
  })

  app.post(solanaPayPath, async (request, reply) => {
    const { payment, driver, asset } = await resolve(request.params)
    const body = z.safeParse(SolanaPayBody, request.body ?? null)
    if (!body.success) throw bodyValidationError(body.error.issues)
    if (payment.status === 'expired') fail('payment_expired', 'The payment has expired.')
    if (payment.status !== 'requires_action')
      fail('invalid_state', `The payment is ${payment.status}: there is nothing to pay.`)
    const tokenAmount = tokenAmountFor({ unit: payment.amount_unit, value: payment.amount_value }, asset)
    if (tokenAmount === null || tokenAmount <= 0n)
      throw paramsError('path.token', 'This payment cannot be paid in that token.')
    const now = app.now()
    const reference = await pushReference(app.db, payment.id, driver.newPushReference!, now)
    const transaction = await driver.transactionRequest!({
      payment: {
        id: payment.id,
        mode: payment.mode,
        merchantId: payment.merchant_id,
        amount: { unit: payment.amount_unit, value: payment.amount_value },
        expiresAt: unixSeconds(payment.expires_at),
      },
      asset,
      tokenAmount,
      expiresAt: unixSeconds(payment.expires_at),
      reference,
      label: payment.merchant_name,
      account: body.data.account,
    })
    return reply.header('cache-control', 'no-store').send({
      transaction,
      message: `${payment.merchant_name}: payment ${payment.id}`,
    } satisfies z.output<typeof SolanaPayTransaction>)
  })
}

import type { FastifyInstance, FastifyReply } from 'fastify'
import { isFinalStatus } from '../../contract/common.js'
import { isPayError } from '../../errors/PayError.js'
import { createDriverRegistry } from '../gateway/drivers.js'
import { pushOptions } from '../gateway/options.js'
import { findGatewayPayment, type GatewayPaymentRow } from '../gateway/payment.js'
import { findOption } from '../gateway/store.js'
import { gatewayUrl, paymentAmount, statusJson, unixSeconds } from '../payments/views.js'
import { type PushLink, renderCheckoutPage } from './checkout.js'
import { renderCollectPage } from './collect.js'
import { amountText } from './format.js'
import { escapeHtml, type Page, renderPage } from './html.js'
import { parsePrefill, parseTheme, parseThemeVariables } from './params.js'

const paymentIdPattern = /^pay_[A-Za-z0-9]{1,60}$/

function sendPage(reply: FastifyReply, page: Page, status = 200) {
  return reply
    .code(status)
    .header('content-type', 'text/html; charset=utf-8')
    .header('content-security-policy', page.csp)
    .header('cache-control', 'no-store')
    .header('x-content-type-options', 'nosniff')
    .header('referrer-policy', 'no-referrer')
    .send(page.html)
}

function notFound(reply: FastifyReply) {
  const page = renderPage({
    title: 'Payment not found',
    body: '<main><div class="card"><h1>Payment not found</h1><p class="muted">Check the link and try again.</p></div></main>',
    style: '',
    script: '',
    frameAncestors: "'self'",
  })
  return sendPage(reply, page, 404)
}

function initialIcon(name: string): string {
  const initial = escapeHtml(name.slice(0, 1).toUpperCase())
  return `<svg xmlns="http://www.w3.org/2000/svg" width="96" height="96" viewBox="0 0 96 96"><rect width="96" height="96" rx="20" fill="#1f4fd1"/><text x="48" y="64" font-family="sans-serif" font-size="48" font-weight="700" fill="#fff" text-anchor="middle">${initial}</text></svg>`
}

/**
 * The hosted pages. They are public (a buyer's browser has no credentials): the payment id in a link
 * shows what the link already implies (merchant, amount, status), never buyer data.
 */
export async function pageRoutes(app: FastifyInstance): Promise<void> {
  async function load(id: string): Promise<GatewayPaymentRow | undefined> {
    if (!paymentIdPattern.test(id)) return undefined
    try {
      return await findGatewayPayment(app.db, id, null, app.now())
    } catch (error) {
      if (isPayError(error, 'payment_not_found')) return undefined
      throw error
    }
  }

  const registry = createDriverRegistry(app.config, app.chainDrivers ?? [])
  /** What a buyer who can only send scans: each push option's links (none in test mode, none on errors). */
  async function pushLinks(row: GatewayPaymentRow): Promise<PushLink[]> {
    const options = await pushOptions({
      db: app.db,
      config: app.config,
      registry,
      payment: row,
      now: app.now(),
    })
    return options.flatMap((option) => {
      const push = option.push
      if (!push) return []
      const name = `${option.amount.display.assetSymbol} on ${option.amount.display.networkName ?? push.asset.split(':')[0]}`
      return [
        ...(push.transactionUrl ? [{ label: `${name}: Solana Pay`, url: push.transactionUrl }] : []),
        { label: push.transactionUrl ? `${name}: transfer request` : name, url: push.url },
      ]
    })
  }

  app.get<{ Params: { id: string } }>('/pay/:id', async (request, reply) => {
    const row = await load(request.params.id)
    if (!row) return notFound(reply)
    const page = renderCheckoutPage({
      pushLinks: isFinalStatus(row.status) ? [] : await pushLinks(row),
      paymentId: row.id,
      merchantName: row.merchant_name,
      merchantIconUrl: row.merchant_icon_url,
      amountText: amountText(paymentAmount(row, app.config)),
      status: row.status,
      isFinal: isFinalStatus(row.status),
      txId: row.status === 'succeeded' ? row.tx_id : null,
      link: gatewayUrl(app.config, row.id),
      statusUrl: `/pay/${row.id}/status`,
      expiresAt: unixSeconds(row.expires_at),
      testMode: row.mode === 'test',
      checkout: row.checkout,
    })
    return sendPage(reply, page)
  })

  // The icon a Solana Pay wallet shows next to the merchant's name when the merchant has none of its own.
  app.get<{ Params: { id: string } }>('/pay/:id/icon.svg', async (request, reply) => {
    const row = await load(request.params.id)
    if (!row) return reply.code(404).send({ code: 'payment_not_found', message: 'Payment not found.' })
    return reply
      .header('content-type', 'image/svg+xml')
      .header('cache-control', 'public, max-age=300')
      .header('x-content-type-options', 'nosniff')
      .send(initialIcon(row.merchant_name))
  })

  app.get<{ Params: { id: string } }>('/pay/:id/status', async (request, reply) => {
    const row = await load(request.params.id)
    if (!row) return reply.code(404).send({ code: 'payment_not_found', message: 'Payment not found.' })
    return reply.header('cache-control', 'no-store').send(statusJson(row))
  })

  app.get<{
    Params: { id: string }
    Querystring: { option?: string; prefill?: string; theme?: string; themeVariables?: string }
  }>('/collect/:id', async (request, reply) => {
    const row = await load(request.params.id)
    if (!row) return notFound(reply)
    const optionId = typeof request.query.option === 'string' ? request.query.option : ''
    const option = /^opt_[A-Za-z0-9]{1,60}$/.test(optionId)
      ? await findOption(app.db, row.id, optionId)
      : undefined
    const unavailable = !option
      ? 'This form link is not valid for this payment.'
      : !option.collect_data_required
        ? 'This payment option does not need your details.'
        : row.status === 'expired'
          ? 'The payment has expired.'
          : row.status !== 'requires_action'
            ? `The payment is already ${row.status.replace('_', ' ')}.`
            : undefined
    const page = renderCollectPage({
      paymentId: row.id,
      optionId,
      merchantName: row.merchant_name,
      amountText: amountText(paymentAmount(row, app.config)),
      prefill: parsePrefill(request.query.prefill),
      theme: parseTheme(request.query.theme),
      rootVariables: parseThemeVariables(request.query.themeVariables),
      ...(unavailable ? { unavailable } : {}),
    })
    return sendPage(reply, page, unavailable && !option ? 404 : 200)
  })
}

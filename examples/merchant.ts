// Merchant side with caipay/client: create a merchant, crypto settlement, a payment, poll it, refund it.
// Run: npx tsx examples/merchant.ts
import { createMerchantClient } from '../src/client/index.js'
import { startExampleServer } from './support.js'

const { server, apiKey, close } = await startExampleServer()
try {
  const api = createMerchantClient({ baseUrl: server.url, apiKey })

  const { merchant } = await api.createMerchant({
    body: { merchantName: 'Corner Coffee', merchantEmail: 'owner@corner.example' },
  })
  console.log('merchant', merchant.id)

  const { settlements } = await api.createCryptoSettlements({
    params: { merchantId: merchant.id },
    body: {
      settlements: [
        {
          asset: 'eip155:8453/erc20:0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913',
          destination: 'eip155:8453:0x2222222222222222222222222222222222222222',
        },
      ],
    },
  })
  console.log('settlement', settlements[0]?.id, settlements[0]?.asset)

  const payment = await api.createPayment({
    merchantId: merchant.id,
    body: { referenceId: 'order-1001', amount: { unit: 'iso4217/USD', value: '450' } },
  })
  console.log('payment', payment.paymentId, 'open', payment.gatewayUrl)

  // In test mode the sandbox endpoint stands in for a buyer; a wallet would pay through the gateway.
  await api.simulatePayment({
    merchantId: merchant.id,
    params: { id: payment.paymentId },
    body: { outcome: 'succeeded' },
  })

  let status = await api.getPaymentStatus({ merchantId: merchant.id, params: { id: payment.paymentId } })
  while (!status.isFinal) {
    await new Promise((resolve) => setTimeout(resolve, status.pollInMs ?? 1000))
    status = await api.getPaymentStatus({ merchantId: merchant.id, params: { id: payment.paymentId } })
  }
  console.log('status', status.status, status.txId)

  // A refund is pending until its transfer is made (in test mode a simulated one, a moment later).
  let refund = await api.createRefund({ merchantId: merchant.id, body: { paymentId: payment.paymentId } })
  while (refund.status === 'pending') {
    await new Promise((resolve) => setTimeout(resolve, 250))
    refund = await api.getRefund({ merchantId: merchant.id, params: { id: refund.refundId } })
  }
  console.log('refund', refund.refundId, refund.status, refund.txId)
  const page = await api.listMerchantPayments({ merchantId: merchant.id, query: { limit: 10 } })
  console.log('refunded', refund.paymentId, 'listed as refunded:', page.data[0]?.refunded)
} finally {
  await close()
}

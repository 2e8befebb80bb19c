// Test fixtures (not exported from the package): valid and invalid values of the contract schemas, shared by
// the zod schema tests and the tests of the generated JSON Schemas and their validator.
import type * as z from 'zod/mini'
import {
  Action,
  Amount,
  AmountDisplay,
  AmountInput,
  CancelResponse,
  ConfirmBody,
  ConfirmResponse,
  CryptoSettlementCreateBody,
  CryptoSettlementUpdateBody,
  ErrorResponse,
  FetchBody,
  FetchResponse,
  GatewayPayment,
  MerchantCreateBody,
  MerchantListQuery,
  MerchantResponse,
  MerchantUpdateBody,
  OptionsBody,
  OptionsResponse,
  Payment,
  PaymentCreateBody,
  PaymentCreateBodyPreview,
  PaymentCreateResponse,
  PaymentListQuery,
  PaymentListResponse,
  PaymentStatus,
  RefundBody,
  SettlementsResponse,
  SimulateBody,
  StatusResponse,
} from './index.js'

const usdc = 'eip155:1/erc20:0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48'
const buyer = 'eip155:1:0x1111111111111111111111111111111111111111'
const display = { assetName: 'USD Coin', assetSymbol: 'USDC', decimals: 6 }
const amount = { unit: `caip19/${usdc}`, value: '1000000', display }
const usd = {
  unit: 'iso4217/USD',
  value: '1250',
  display: { assetName: 'US Dollar', assetSymbol: 'USD', decimals: 2 },
}
const option = {
  id: 'opt_1',
  account: buyer,
  amount,
  etaS: 5,
  expiresAt: 1_800_000_000,
  actions: [
    {
      type: 'walletRpc',
      walletRpc: { chainId: 'eip155:1', method: 'eth_signTypedData_v4', params: '["0x1","{}"]' },
    },
    { type: 'build', build: { data: 'opaque' } },
  ],
  collectData: { url: 'https://pay.example.com/collect/pay_1', schema: '{}' },
}

export type Sample = [name: string, schema: z.ZodMiniType, valid: unknown[], invalid: unknown[]]

export const samples: Sample[] = [
  ['PaymentStatus', PaymentStatus, ['requires_action', 'cancelled'], ['done', '', null]],
  [
    'AmountDisplay',
    AmountDisplay,
    [display, { ...display, iconUrl: null, networkName: 'Ethereum' }],
    [{ ...display, decimals: -1 }, { ...display, decimals: 1.5 }, { assetName: 'x' }],
  ],
  [
    'Amount',
    Amount,
    [amount, usd],
    [
      { ...amount, value: '1.5' },
      { ...amount, value: '-1' },
      { ...amount, unit: 'USD' },
      { ...amount, unit: 'caip19/nope' },
      { unit: amount.unit, value: '1' },
    ],
  ],
  [
    'AmountInput',
    AmountInput,
    [{ unit: 'iso4217/EUR', value: '1' }],
    [
      { unit: 'iso4217/USD', value: '0' },
      { unit: 'iso4217/usd', value: '1' },
      { unit: 'iso4217/USD', value: 1 },
      { unit: 'iso4217/USD', value: '1', display },
    ],
  ],
  [
    'ErrorResponse',
    ErrorResponse,
    [{ code: 'invalid_params', message: 'x' }],
    [{ code: 'x' }, { message: 'x' }],
  ],
  [
    'MerchantCreateBody',
    MerchantCreateBody,
    [
      { merchantName: 'Shop', merchantEmail: 'a@b.co' },
      { merchantName: 'Shop', merchantEmail: 'a@b.co', iconUrl: null },
      { merchantName: 'S', merchantEmail: 'a@b.co', iconUrl: 'https://x.co/i.png' },
    ],
    [
      { merchantName: '', merchantEmail: 'a@b.co' },
      { merchantName: 'x'.repeat(257), merchantEmail: 'a@b.co' },
      { merchantName: 'S', merchantEmail: 'nope' },
      { merchantName: 'S', merchantEmail: 'a@b.co', iconUrl: 'http://x.co/i.png' },
      { merchantName: 'S', merchantEmail: 'a@b.co', extra: 1 },
    ],
  ],
  [
    'MerchantUpdateBody',
    MerchantUpdateBody,
    [{ merchantName: 'New' }, { iconUrl: null }],
    [{}, { merchantName: 5 }, { status: 'active' }],
  ],
  [
    'MerchantListQuery',
    MerchantListQuery,
    [{}, { limit: '100', status: 'active', search: 'shop' }],
    [{ limit: '0' }, { limit: '101' }, { limit: 'ten' }, { status: 'deleted' }],
  ],
  [
    'MerchantResponse',
    MerchantResponse,
    [
      {
        merchant: {
          id: 'mrch_1',
          name: 'S',
          email: 'a@b.co',
          iconUrl: null,
          status: 'active',
          createdAt: '2026-01-01T00:00:00Z',
          settlements: { crypto: [], fiat: [] },
        },
      },
    ],
    [{ merchant: { id: 'mrch_1' } }],
  ],
  [
    'SettlementsResponse',
    SettlementsResponse,
    [{ crypto: [{ id: 'crypto_1', asset: usdc, destination: buyer }], fiat: [] }],
    [{ crypto: [{ id: 'c', asset: 'x', destination: buyer }], fiat: [] }],
  ],
  [
    'CryptoSettlementCreateBody',
    CryptoSettlementCreateBody,
    [{ settlements: [{ asset: usdc, destination: buyer }] }],
    [
      { settlements: [] },
      { settlements: Array(51).fill({ asset: usdc, destination: buyer }) },
      {
        settlements: [{ asset: usdc, destination: 'eip155:8453:0x1111111111111111111111111111111111111111' }],
      },
      { settlements: [{ asset: usdc, destination: 'eip155:1:0x12' }] },
    ],
  ],
  [
    'CryptoSettlementUpdateBody',
    CryptoSettlementUpdateBody,
    [{ destination: buyer }],
    [{ destination: 'nope' }, {}],
  ],
  [
    'PaymentCreateBody',
    PaymentCreateBody,
    [
      { referenceId: 'ORDER-1 /:.,+', amount: { unit: 'iso4217/USD', value: '1250' } },
      { referenceId: 'a', amount: { unit: `caip19/${usdc}`, value: '1' }, expiresAt: 1_900_000_000 },
    ],
    [
      { referenceId: '', amount: { unit: 'iso4217/USD', value: '1' } },
      { referenceId: 'x'.repeat(36), amount: { unit: 'iso4217/USD', value: '1' } },
      { referenceId: 'a_b', amount: { unit: 'iso4217/USD', value: '1' } },
      { referenceId: 'a', amount: { unit: 'iso4217/USD', value: '-5' } },
      {
        referenceId: 'a',
        amount: { unit: 'iso4217/USD', value: '1' },
        checkout: { successUrl: 'https://a.co', errorUrl: 'https://a.co' },
      },
    ],
  ],
  [
    'PaymentCreateBodyPreview',
    PaymentCreateBodyPreview,
    [
      {
        referenceId: 'a',
        amount: { unit: 'iso4217/USD', value: '1' },
        checkout: { successUrl: 'https://a.co/ok', errorUrl: 'https://a.co/err' },
      },
    ],
    [
      {
        referenceId: 'a',
        amount: { unit: 'iso4217/USD', value: '1' },
        checkout: { successUrl: 'nope', errorUrl: 'https://a.co' },
      },
    ],
  ],
  [
    'PaymentCreateResponse',
    PaymentCreateResponse,
    [
      {
        paymentId: 'pay_1',
        gatewayUrl: 'https://x/pay/pay_1',
        status: 'requires_action',
        expiresAt: 1,
        isFinal: false,
        pollInMs: 1000,
      },
    ],
    [{ paymentId: 'pay_1' }],
  ],
  [
    'Payment',
    Payment,
    [
      {
        paymentId: 'pay_1',
        status: 'succeeded',
        referenceId: 'r',
        amount: usd,
        failureCode: null,
        info: { txId: 'test:pay_1', optionAmount: amount },
        settlement: { successful: { txId: '0xabc', amount: { unit: `caip19/${usdc}` } } },
        expiresAt: 1,
        createdAt: 'x',
      },
      {
        paymentId: 'pay_1',
        status: 'failed',
        referenceId: 'r',
        amount: usd,
        failureCode: 'declined_user',
        expiresAt: 1,
        createdAt: 'x',
      },
    ],
    [
      {
        paymentId: 'pay_1',
        status: 'failed',
        referenceId: 'r',
        amount: usd,
        failureCode: 'other',
        expiresAt: 1,
        createdAt: 'x',
      },
    ],
  ],
  [
    'PaymentListQuery',
    PaymentListQuery,
    [
      {},
      { status: ['succeeded', 'failed'], startTs: '1', endTs: '2', limit: '200', merchantId: 'mrch_1' },
      { status: 'succeeded' },
    ],
    [
      { limit: '201' },
      { status: 'paid' },
      { startTs: '-1' },
      { endTs: '253402300800' },
      { referenceId: 'a_b' },
    ],
  ],
  [
    'PaymentListResponse',
    PaymentListResponse,
    [
      {
        data: [
          {
            paymentId: 'pay_1',
            merchantId: 'm',
            referenceId: 'r',
            status: 'processing',
            amount: usd,
            refunded: false,
            createdAt: 'x',
            updatedAt: 'y',
          },
        ],
        nextCursor: null,
      },
    ],
    [{ data: [] }],
  ],
  [
    'StatusResponse',
    StatusResponse,
    [
      { status: 'processing', isFinal: false, pollInMs: 1000 },
      { status: 'succeeded', isFinal: true, pollInMs: null, txId: 'test:pay_1' },
    ],
    [{ status: 'processing', isFinal: false }],
  ],
  [
    'CancelResponse',
    CancelResponse,
    [{ paymentId: 'pay_1', status: 'cancelled', cancelledAt: 'x', cancelledReason: 'cancelled_by_user' }],
    [{ paymentId: 'pay_1', status: 'failed', cancelledAt: 'x', cancelledReason: 'cancelled_by_user' }],
  ],
  [
    'RefundBody',
    RefundBody,
    [{ paymentId: 'pay_Abc123' }, { paymentId: `pay_${'a'.repeat(60)}` }],
    [
      { paymentId: 'pay_' },
      { paymentId: 'pi_123' },
      { paymentId: `pay_${'a'.repeat(61)}` },
      { paymentId: 'pay_a-b' },
      {},
    ],
  ],
  ['SimulateBody', SimulateBody, [{ outcome: 'failed' }], [{ outcome: 'processing' }]],
  [
    'GatewayPayment',
    GatewayPayment,
    [
      {
        paymentId: 'pay_1',
        status: 'requires_action',
        amount: usd,
        expiresAt: 1,
        merchant: { name: 'S', iconUrl: null },
      },
    ],
    [{ paymentId: 'pay_1' }],
  ],
  [
    'Action',
    Action,
    option.actions,
    [
      { type: 'walletRpc', walletRpc: { chainId: 'eip155', method: 'x', params: '[]' } },
      { type: 'other' },
      { type: 'walletRpc', walletRpc: { chainId: 'eip155:1', method: 'x', params: [] } },
    ],
  ],
  [
    'OptionsBody',
    OptionsBody,
    [{ accounts: [buyer] }, { accounts: [], refresh: ['opt_1'] }],
    [{ accounts: ['eip155:1:0x12'] }, { accounts: 'x' }, {}],
  ],
  [
    'OptionsResponse',
    OptionsResponse,
    [{ options: [option] }, { options: [], resultInfo: { txId: 'test:pay_1', optionAmount: amount } }],
    [{ options: [{ ...option, etaS: -1 }] }],
  ],
  [
    'FetchBody',
    FetchBody,
    [{ optionId: 'opt_1', data: 'x' }],
    [{ optionId: '', data: 'x' }, { optionId: 'opt_1' }],
  ],
  ['FetchResponse', FetchResponse, [{ actions: [option.actions[0]] }], [{ actions: [option.actions[1]] }]],
  [
    'ConfirmBody',
    ConfirmBody,
    [{ optionId: 'opt_1', results: ['0xabc'] }],
    [
      { optionId: 'opt_1', results: [] },
      { optionId: 'opt_1', results: [1] },
    ],
  ],
  [
    'ConfirmResponse',
    ConfirmResponse,
    [{ status: 'processing', isFinal: false, pollInMs: 500 }],
    [{ status: 'processing' }],
  ],
]

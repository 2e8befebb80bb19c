export {
  hostOf,
  type ParsePaymentLinkOptions,
  type PaymentLink,
  parsePaymentLink,
} from './parsePaymentLink.js'

import * as z from 'zod/mini'
import { ErrorResponse, GatewayPayment, OptionsResponse, StatusResponse } from '../src/contract/index.js'

for (const [n, s] of Object.entries({ GatewayPayment, ErrorResponse, StatusResponse })) {
  console.log(n, JSON.stringify(z.toJSONSchema(s as any, { io: 'input', unrepresentable: 'any' })))
}
const r = z.safeParse(StatusResponse, {
  status: 'processing',
  isFinal: false,
  pollInMs: 1,
  extra: 1,
  txId: undefined,
})
console.log(r)
console.log(
  z.safeParse(ErrorResponse, { code: 'x', message: 'y', issues: [{ path: 'a', message: 'b', z: 1 }] }).error
    ?.issues,
)
console.log(
  JSON.stringify(
    z.safeParse(GatewayPayment, {
      paymentId: 1,
      status: 'x',
      amount: { unit: 'nope', value: '01', display: {} },
      expiresAt: 1.5,
      merchant: null,
    }).error?.issues,
  ),
)

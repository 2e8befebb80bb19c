import { createServer, type IncomingMessage } from 'node:http'
import type { AddressInfo } from 'node:net'

/**
 * A load balancer in front of two real nodes: the chain's own Anvil and a replica behind it (an Anvil
 * forked from it at an older block, not mining: it answers with that block's head, "not found" for
 * anything mined since, nonce counts as of then, and refuses block numbers past its head). Each HTTP
 * request (a JSON-RPC batch included) goes to one backend, as load balancers route.
 *
 * `lookupsToReplica`: requests that look a transaction up (receipt, transaction by hash) go to the
 * replica, the rest to the primary: the worst split for a reader that asks "is it mined?" and "is its
 * nonce used?" in separate requests. `logsToReplica`: requests that read logs go to the replica (a range
 * that ends past its head is answered without the logs of the blocks it does not have): the worst split for a scan that reads the
 * head from one backend and the logs from another. `codeToReplica`: requests that read a contract's code go
 * to the replica (from before a deployment, it answers "no code"): the worst split for a reader that
 * decides from one code read whether a contract is there.
 */
export interface LoadBalancer {
  readonly url: string
  lookupsToReplica: boolean
  logsToReplica: boolean
  codeToReplica: boolean
  /** Requests the replica answered. */
  replicaRequests: number
  stop(): Promise<void>
}

const lookups = /eth_getTransactionReceipt|eth_getTransactionByHash/
const logReads = /eth_getLogs/
const codeReads = /eth_getCode/

export async function startLoadBalancer(
  primary: string,
  replica: () => string | undefined,
): Promise<LoadBalancer> {
  const balancer: LoadBalancer = {
    url: '',
    lookupsToReplica: false,
    logsToReplica: false,
    codeToReplica: false,
    replicaRequests: 0,
    stop: async () => {},
  }
  const server = createServer((req, res) => {
    void (async () => {
      const body = await read(req)
      const lagging = replica()
      const toReplica =
        lagging !== undefined &&
        ((balancer.lookupsToReplica && lookups.test(body)) ||
          (balancer.logsToReplica && logReads.test(body)) ||
          (balancer.codeToReplica && codeReads.test(body)))
      if (toReplica) balancer.replicaRequests += 1
      try {
        const answer = await fetch(toReplica ? lagging : primary, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body,
        })
        res.writeHead(answer.status, { 'content-type': 'application/json' })
        res.end(await answer.text())
      } catch {
        res.writeHead(502)
        res.end()
      }
    })()
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  Object.assign(balancer, {
    url: `http://127.0.0.1:${port}`,
    stop: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  })
  return balancer
}

async function read(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = []
  for await (const chunk of req) chunks.push(chunk as Buffer)
  return Buffer.concat(chunks).toString()
}

import { type ChildProcess, execFileSync, spawn } from "node:child_process";

/** A host of the virtual network: a network namespace with one link to the switch. */
export interface Host {
  name: string;
  ns: string;
  address: string;
  /** The link's end inside the switch namespace (what `cut` takes down). */
  port: string;
}

const ip = (...args: string[]) => execFileSync("ip", args, { stdio: ["ignore", "pipe", "pipe"] });

/**
 * Hosts as Linux network namespaces joined by veth links to a bridge in a switch namespace of
 * their own: each host has its own address and loopback, processes in one reach the others
 * only over the bridge, and pulling a host's cable is one `ip link set down`. Nothing outside
 * the namespaces this class creates is touched.
 */
export class VirtualNetwork {
  private readonly hosts = new Map<string, Host>();
  private readonly switchNs: string;

  /** @param subnet the first three octets, e.g. "10.254.7" */
  constructor(
    private readonly tag: string,
    private readonly subnet: string,
  ) {
    this.switchNs = `${tag}-switch`;
  }

  /** True when this process may create namespaces (root, with iproute2). */
  static available(): boolean {
    try {
      ip("netns", "list");
      return process.getuid?.() === 0;
    } catch {
      return false;
    }
  }

  create(): void {
    ip("netns", "add", this.switchNs);
    ip("-n", this.switchNs, "link", "add", "br0", "type", "bridge");
    ip("-n", this.switchNs, "link", "set", "br0", "up");
  }

  /** Adds a host at `<subnet>.<octet>`, linked to the switch and up. */
  addHost(name: string, octet: number): Host {
    const host: Host = {
      name,
      ns: `${this.tag}-${name}`,
      address: `${this.subnet}.${octet}`,
      port: `p-${name}`.slice(0, 15),
    };
    ip("netns", "add", host.ns);
    ip(
      "link",
      "add",
      "eth0",
      "netns",
      host.ns,
      "type",
      "veth",
      "peer",
      "name",
      host.port,
      "netns",
      this.switchNs,
    );
    ip("-n", this.switchNs, "link", "set", host.port, "master", "br0");
    ip("-n", this.switchNs, "link", "set", host.port, "up");
    ip("-n", host.ns, "addr", "add", `${host.address}/24`, "dev", "eth0");
    ip("-n", host.ns, "link", "set", "eth0", "up");
    ip("-n", host.ns, "link", "set", "lo", "up");
    this.hosts.set(name, host);
    return host;
  }

  /** Pulls the host's cable at the switch: its packets go nowhere until `restore`. */
  cut(host: Host): void {
    ip("-n", this.switchNs, "link", "set", host.port, "down");
  }

  restore(host: Host): void {
    ip("-n", this.switchNs, "link", "set", host.port, "up");
  }

  /** Starts a program inside the host's namespace. */
  run(host: Host, command: string, args: string[], env: NodeJS.ProcessEnv): ChildProcess {
    return spawn("ip", ["netns", "exec", host.ns, command, ...args], {
      env,
      stdio: ["pipe", "pipe", "pipe"],
    });
  }

  /** SIGKILLs every process in the host's namespace, as a power cut would. */
  killAll(host: Host): number[] {
    const pids = ip("netns", "pids", host.ns).toString().split(/\s+/).filter(Boolean).map(Number);
    for (const pid of pids) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // already gone
      }
    }
    return pids;
  }

  /** Kills whatever still runs in the namespaces, then deletes them (and so their links). */
  destroy(): void {
    for (const host of this.hosts.values()) {
      try {
        this.killAll(host);
        ip("netns", "del", host.ns);
      } catch {
        // never created, or already gone
      }
    }
    try {
      ip("netns", "del", this.switchNs);
    } catch {
      // already gone
    }
  }
}

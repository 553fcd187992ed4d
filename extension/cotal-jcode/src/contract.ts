/**
 * The Cotal manager's connector contract, as this package relies on it.
 *
 * Cotal itself (`@cotal-ai/core`) cannot be installed here, so its documented shapes are
 * restated as types: what the manager hands `buildLaunch` (`LaunchOpts`), what it expects back
 * (`LaunchSpec`) and which declarations it reads before it provisions anything (`Connector`).
 * Only the fields this connector reads or returns are described in detail; the manager may pass
 * more, and TypeScript's structural typing lets a real `@cotal-ai/core` connector registry accept
 * this object as is.
 */

/** One operator MCP server the manager would share with a seat (`.mcp.json` shaped). */
export interface McpServerSpec {
  command?: string;
  args?: string[];
  env?: Record<string, string>;
  url?: string;
  [key: string]: unknown;
}

/** Identity, grants and requests the manager hands a connector for one launch. */
export interface LaunchOpts {
  space: string;
  name: string;
  role?: string;
  /** Stable card id (an nkey under static auth). */
  id?: string;
  /** Path of the minted `.creds` file (static auth). */
  creds?: string;
  /** User-auth launch: principal, sentinel credential path and bearer argv. */
  userAuth?: { owner: string; actor: string; sentinelCredsPath: string; bearerCmd: string[] };
  /** The incarnation's lifecycle uid; required for any authenticated launch. */
  lifecycleUid?: string;
  /** CHAT stream sequence reached before a preservation cut. */
  backfillFloor?: number;
  /** Accepted-row token of the credential's issuance. */
  acceptedToken?: string;
  /** The manager incarnation that launched the seat (shown by `cotal ps --wide`). */
  managerInstance?: string;
  /** Broker URLs, comma separated. */
  servers?: string;
  /** Resolved access policy: the same sets the credentials were minted from. */
  subscribe?: string[];
  allowSubscribe?: string[];
  allowPublish?: string[];
  /** Control-plane capabilities granted (e.g. `spawn`, `run`). */
  capabilities?: string[];
  /** Default channel modes from the persona (`quiet` / `muted`). */
  quiet?: string[];
  muted?: string[];
  /** Agent definition file (`.cotal/agents/<name>.md`): the seat's persona. */
  configPath?: string;
  model?: string;
  variant?: string;
  /** `--opt k=v`, a persona's or a manifest's `launchOptions`, forwarded verbatim by core. */
  launchOptions?: Record<string, unknown>;
  /** `cotal spawn --prompt`: the seat's first driven turn. */
  prompt?: string;
  /** `cotal spawn --resume <id>`: fork that session into the seat. */
  resume?: string;
  /** Reopen this exact session after a supervised restart (manager-internal). */
  continueSession?: string;
  /** Arm the event plane (default on for a connector with an event channel). */
  events?: boolean;
  /** The registration requires the event plane. */
  eventsRequired?: boolean;
  /** `--share-tools`: operator MCP servers to share with the seat. */
  mcpServers?: Record<string, McpServerSpec>;
  /** Extra environment names declared in `spawn.env`. */
  envAllow?: readonly string[];
  /** Absolute paths of the `requires` binaries, resolved by the manager at boot. */
  resolvedBinaries?: Readonly<Record<string, string>>;
  /** The manager's workspace root (where per-seat state lives). */
  workspaceRoot?: string;
}

/** The manager's handle on a seat's control socket; the token stays in its memory. */
export interface ControlEndpoint {
  path: string;
  token: string;
}

/** The recipe the manager spawns. */
export interface LaunchSpec {
  command: string;
  args: string[];
  env?: Record<string, string>;
  confirm?: string;
  control?: ControlEndpoint;
  sessionStatePath?: string;
  /** Private directories this launch wrote (the launch material's); the launcher removes them. */
  artifacts?: string[];
  /** File the manager reads into the seat's resume document (`cotal ps --wide`). */
  resumeRecordPath?: string;
}

export interface ModelVariantInfo {
  name: string;
  options?: Record<string, unknown>;
}

export interface ModelInfo {
  id: string;
  name?: string;
  provider?: string;
  variants?: ModelVariantInfo[];
}

export interface ModelCatalog {
  source?: string;
  models: ModelInfo[];
}

/** A connector extension. Every optional capability is default-deny in the manager. */
export interface Connector {
  readonly kind: "connector";
  readonly name: string;
  buildLaunch(opts: LaunchOpts): LaunchSpec;
  listModels?(opts?: { refresh?: boolean }): ModelCatalog | Promise<ModelCatalog>;
  eventChannel?(principal: { owner: string; actor: string }): string;
  readonly requires?: readonly string[];
  readonly supportsResume?: boolean;
  readonly supportsSessionContinuation?: boolean;
  readonly supportsFreshStart?: boolean;
  readonly supportsToolListAnnounce?: boolean;
  readonly supportsModelVariant?: boolean;
  readonly supportsPrompt?: boolean;
  /** Upper bound for reaching presence after launch; a positive safe integer. */
  readonly readinessTimeoutMs?: number;
  readonly launchHint?: string;
}

/** A registry a connector registers itself with (`@cotal-ai/core`'s `registry`). */
export interface ConnectorRegistry {
  register(extension: Connector): void;
}

/* The in-sandbox half of weft's runCode runtime (Runtime §13). Evaluated first in every
   fresh QuickJS context. It hardens the intrinsics, runs the linked modules and marshals
   values to and from the host. The loader joins all lines into one, so line 1 of `<input>`
   is always internal: use block comments only and end every statement with a semicolon. */
(function (hostCall, emit, resolveSpec) {
  "use strict";
  const G = globalThis;
  const O = Object;
  const defineProperty = O.defineProperty, getProto = O.getPrototypeOf, keys = O.keys;
  const freeze = O.freeze, create = O.create, isArray = Array.isArray;
  const stringify = JSON.stringify, parse = JSON.parse;
  const ObjectProto = O.prototype, MapProto = Map.prototype, SetProto = Set.prototype;
  const DateProto = Date.prototype, BufferProto = ArrayBuffer.prototype;
  const getTime = DateProto.getTime;
  const TYPED = {
    Int8Array, Uint8Array, Uint8ClampedArray, Int16Array, Uint16Array, Int32Array,
    Uint32Array, Float32Array, Float64Array, BigInt64Array, BigUint64Array,
  };
  const typedNames = new Map();
  for (const n of keys(TYPED)) { typedNames.set(TYPED[n].prototype, n); }
  const U8 = Uint8Array, ArrayFrom = Array.from, ErrorCtor = Error;
  const PromiseCtor = Promise, resolved = Promise.resolve.bind(Promise);
  const rejected = Promise.reject.bind(Promise);
  const InternalProto = G.InternalError.prototype;

  /* §13.1: no eval, no Function constructors (also through function prototypes), no
     SharedArrayBuffer or Atomics, and no QuickJS-only globals. */
  const hide = (obj, name, value) => defineProperty(obj, name, {
    value, writable: true, configurable: true, enumerable: false });
  const noEval = function () { throw new EvalError("eval is disabled in the sandbox"); };
  defineProperty(noEval, "name", { value: "eval" });
  const noFunction = function Function() {
    throw new EvalError("the Function constructor is disabled in the sandbox");
  };
  noFunction.prototype = Function.prototype;
  for (const proto of [Function.prototype, getProto(async function () {}),
                       getProto(function* () {}), getProto(async function* () {})]) {
    hide(proto, "constructor", noFunction);
  }
  hide(G, "eval", noEval);
  hide(G, "Function", noFunction);
  for (const name of ["SharedArrayBuffer", "Atomics", "InternalError", "__date_clock",
                      "__weft_host", "__weft_emit", "__weft_resolve"]) {
    delete G[name];
  }

  const serializationError = (message) => {
    const e = new TypeError(message);
    e.name = "SerializationError";
    return e;
  };
  const describe = (v) => {
    try { const c = v.constructor; return (c && c.name) || "object"; } catch (e) { return "object"; }
  };

  /* Values out of the sandbox: a tagged JSON tree (see docs/run-code.md). */
  const sandboxFns = [];
  const hostIds = new WeakMap();
  function enc(v, fns, seen) {
    switch (typeof v) {
      case "string": case "boolean": return v;
      case "undefined": return ["u"];
      case "bigint": return ["b", `${v}`];
      case "number":
        if (v !== v) { return ["n", "NaN"]; }
        if (v === Infinity) { return ["n", "Infinity"]; }
        if (v === -Infinity) { return ["n", "-Infinity"]; }
        if (v === 0 && 1 / v < 0) { return ["n", "-0"]; }
        return v;
      case "symbol": throw serializationError("a symbol cannot cross the sandbox boundary");
      case "function":
        if (hostIds.has(v)) { return ["F", hostIds.get(v)]; }
        if (!fns) { throw serializationError("a function cannot leave the sandbox once it settles"); }
        sandboxFns.push(v);
        return ["f", sandboxFns.length - 1];
    }
    if (v === null) { return null; }
    if (seen.has(v)) { throw serializationError("a cyclic structure cannot cross the sandbox boundary"); }
    seen.add(v);
    try {
      if (isArray(v)) {
        const out = ["A"];
        for (let i = 0; i < v.length; i++) { out.push(enc(v[i], fns, seen)); }
        return out;
      }
      const proto = getProto(v);
      if (proto === ObjectProto || proto === null) {
        const out = {};
        for (const k of keys(v)) { defineProperty(out, k, { value: enc(v[k], fns, seen), enumerable: true }); }
        return ["O", out];
      }
      if (proto === MapProto) {
        const out = ["M"];
        for (const [k, x] of v) { out.push([enc(k, fns, seen), enc(x, fns, seen)]); }
        return out;
      }
      if (proto === SetProto) {
        const out = ["S"];
        for (const x of v) { out.push(enc(x, fns, seen)); }
        return out;
      }
      if (proto === DateProto) {
        const t = getTime.call(v);
        if (t !== t) { throw serializationError("an invalid Date cannot cross the sandbox boundary"); }
        return ["D", t];
      }
      if (proto === BufferProto) { return ["B", ArrayFrom(new U8(v))]; }
      if (typedNames.has(proto)) {
        return ["T", typedNames.get(proto), ArrayFrom(new U8(v.buffer, v.byteOffset, v.byteLength))];
      }
    } finally {
      seen.delete(v);
    }
    throw serializationError(`a ${describe(v)} instance cannot cross the sandbox boundary`);
  }
  const encode = (v, fns) => stringify(enc(v, fns, new Set()));

  /* Values into the sandbox: fresh objects built from the tagged tree. */
  function hostFunction(id, name) {
    const proxy = function (...args) {
      const reply = parse(hostCall(id, encode(args, true)));
      if (reply.e) {
        const err = new ErrorCtor(reply.e.message);
        err.name = reply.e.name;
        if (reply.a) { return rejected(err); }
        throw err;
      }
      const value = dec(reply.v);
      return reply.a ? resolved(value) : value;
    };
    defineProperty(proxy, "name", { value: name || "" });
    hostIds.set(proxy, id);
    return proxy;
  }
  function dec(t) {
    if (t === null || typeof t !== "object") { return t; }
    switch (t[0]) {
      case "u": return undefined;
      case "n": return t[1] === "-0" ? -0 : Number(t[1]);
      case "b": return BigInt(t[1]);
      case "A": { const out = []; for (let i = 1; i < t.length; i++) { out.push(dec(t[i])); } return out; }
      case "O": {
        const out = {};
        for (const k of keys(t[1])) { defineProperty(out, k, { value: dec(t[1][k]), writable: true, enumerable: true, configurable: true }); }
        return out;
      }
      case "M": { const out = new Map(); for (let i = 1; i < t.length; i++) { out.set(dec(t[i][0]), dec(t[i][1])); } return out; }
      case "S": { const out = new Set(); for (let i = 1; i < t.length; i++) { out.add(dec(t[i])); } return out; }
      case "D": return new Date(t[1]);
      case "B": return new U8(t[1]).buffer;
      case "T": return new TYPED[t[1]](new U8(t[2]).buffer);
      case "F": return hostFunction(t[1], t[2]);
      case "f": return sandboxFns[t[1]];
    }
    throw serializationError(`unknown value tag ${stringify(t[0])}`);
  }

  /* §13.2: an imported value is a frozen copy all the way down, so a write to it throws
     (module code is strict). Typed arrays and ArrayBuffers cannot be frozen, and Map, Set
     and Date keep their internal slots writable (JS has no way to freeze those); the
     entries of a Map or Set are frozen all the same. */
  function deepFreeze(v) {
    if (v === null || (typeof v !== "object" && typeof v !== "function")) { return v; }
    const proto = getProto(v);
    if (proto === BufferProto || typedNames.has(proto)) { return v; }
    if (proto === MapProto) {
      for (const [k, x] of v) { deepFreeze(k); deepFreeze(x); }
    } else if (proto === SetProto) {
      for (const x of v) { deepFreeze(x); }
    } else {
      for (const k of keys(v)) { deepFreeze(v[k]); }
    }
    return freeze(v);
  }

  /* Built up front: once the heap is exhausted, even a small object literal cannot be made. */
  const OOM = { kind: "memory", name: "MemoryError", message: "out of memory" };
  const OOM_JSON = stringify(OOM);
  function errorRecord(e) {
    /* QuickJS throws null when it cannot even allocate its "out of memory" error. */
    if (e === null || (typeof e === "object" && getProto(e) === InternalProto && e.message === "out of memory")) {
      return OOM;
    }
    let name = "Error", message = "", stack;
    try {
      if (e !== null && typeof e === "object") {
        name = String(e.name === undefined ? "Error" : e.name);
        message = String(e.message === undefined ? "" : e.message);
        stack = typeof e.stack === "string" ? e.stack : undefined;
      } else {
        message = String(e);
      }
    } catch (inner) {
      message = "a thrown value that cannot be printed";
    }
    const kind = name === "InternalError" && message === "out of memory" ? "memory" : "error";
    return { kind, name, message, stack };
  }

  /* Modules: records made by the linked bundle, evaluated depth-first, once each. */
  const modules = new Map();
  let params = [];
  let fatal = null;
  function namespace(getters) {
    const ns = create(null);
    for (const k of keys(getters)) { defineProperty(ns, k, { get: getters[k], enumerable: true }); }
    defineProperty(ns, Symbol.toStringTag, { value: "Module" });
    return freeze(ns);
  }
  function imp(mid) {
    const rec = modules.get(mid);
    return rec.ns;
  }
  function evaluate(mid) {
    const rec = modules.get(mid);
    if (!rec.promise) {
      rec.promise = (async () => {
        for (const dep of rec.deps) { await evaluate(dep); }
        if (rec.fn) { await rec.fn(moduleApi(mid), ...params); }
      })();
    }
    return rec.promise;
  }
  function moduleApi(mid) {
    const key = mid.slice(2);
    return freeze({
      imp,
      exp(getters) { modules.get(mid).ns = namespace(getters); },
      i(spec) {
        const target = resolveSpec(key, String(spec));
        if (!target) {
          fatal = { kind: "link_error", name: "LinkError", message: target === "" ? `cannot import ${stringify(String(spec))}` : "" };
          emit("fatal", stringify({ spec: String(spec), from: key }));
          return new PromiseCtor(() => {});
        }
        return evaluate(target).then(() => imp(target));
      },
      meta: freeze({ url: `sandbox:${key}` }),
    });
  }

  let outcome = null;
  async function main(entry, fnName, args) {
    await evaluate(entry);
    const ns = imp(entry);
    if (!(fnName in ns)) {
      return { kind: "link_error", name: "LinkError", message: `the module has no export named ${stringify(fnName)}` };
    }
    let candidate = ns[fnName];
    if (typeof candidate === "function") {
      candidate = candidate(...args);
    } else if (args.length) {
      return { kind: "error", name: "TypeError", message: `export ${stringify(fnName)} is not a function, so it cannot be called with ${args.length} argument(s)` };
    }
    while (candidate !== null && (typeof candidate === "object" || typeof candidate === "function") && typeof candidate.then === "function") {
      candidate = await candidate;
    }
    return { kind: "success", value: encode(candidate, false) };
  }

  const pending = new Map();
  let nextToken = 0;
  const console = freeze({
    log: (...a) => log("log", a), info: (...a) => log("info", a), warn: (...a) => log("warn", a),
    error: (...a) => log("error", a), debug: (...a) => log("debug", a),
    trace: (...a) => log("debug", a),
  });
  function log(level, args) {
    const out = [];
    for (const a of args) {
      try { out.push(enc(a, false, new Set())); } catch (e) {
        try { out.push(String(a)); } catch (e2) { out.push("[unprintable]"); }
      }
    }
    emit("log", stringify({ level, args: out }));
  }
  const report = function report(value) { emit("report", encode(value, false)); };

  return function dispatch(op, a, b, c) {
    switch (op) {
      case "load":
        a(freeze({
          def(mid, deps, fn) { modules.set(mid, { deps, fn, ns: null, promise: null }); },
        }));
        return null;
      case "synthetic": {
        const table = parse(a);
        for (const spec of keys(table)) {
          const value = dec(table[spec]);
          const ns = create(null);
          for (const k of keys(value)) { defineProperty(ns, k, { value: deepFreeze(value[k]), enumerable: true }); }
          defineProperty(ns, Symbol.toStringTag, { value: "Module" });
          modules.set(`s:${spec}`, { deps: [], fn: null, ns: freeze(ns), promise: null });
        }
        return null;
      }
      case "params": {
        const values = dec(parse(b));
        params = parse(a).map((name) => name === "console" && !(name in values) ? console
          : name === "report" && !(name in values) ? report : values[name]);
        return null;
      }
      case "start":
        outcome = null;
        main(a, b, dec(parse(c))).then((r) => { outcome = r; }, (e) => { outcome = errorRecord(e); });
        return null;
      case "outcome":
        if (fatal) { return stringify(fatal); }
        if (outcome === OOM) { return OOM_JSON; }
        return outcome === null ? null : stringify(outcome);
      case "invoke": {
        const token = nextToken++;
        try {
          const value = sandboxFns[a](...dec(parse(b)));
          if (value !== null && typeof value === "object" && typeof value.then === "function") {
            pending.set(token, null);
            resolved(value).then((v) => pending.set(token, { v: enc(v, true, new Set()) }),
                                 (e) => pending.set(token, { e: errorRecord(e) }));
            return stringify({ token });
          }
          return stringify({ v: enc(value, true, new Set()) });
        } catch (e) {
          return stringify({ e: errorRecord(e) });
        }
      }
      case "collect": {
        const got = pending.get(a);
        if (got === null) { return null; }
        pending.delete(a);
        return stringify(got);
      }
    }
    throw new ErrorCtor(`unknown runtime op ${op}`);
  };
})

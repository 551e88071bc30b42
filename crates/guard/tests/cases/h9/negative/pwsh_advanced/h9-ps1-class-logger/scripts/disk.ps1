class Log {
    [string]$Path

    Log([string]$path) {
        $this.Path = $path
    }

    [void] Write([string]$message) {
        $line = "{0:u} {1}" -f (Get-Date), $message
        Add-Content -Path $this.Path -Value $line
        Write-Host $line
    }

    [string] Tail([int]$n) {
        return (Get-Content -Path $this.Path -Tail $n) -join "`n"
    }
}

class Probe {
    [object[]] Drives() {
        return Get-PSDrive -PSProvider FileSystem
    }

    [string] Run([string]$expr) {
        $block = [ScriptBlock]::Create('Get-Date -Format o')
        return (& $block)
    }
}

$log = [Log]::new((Join-Path $env:TEMP 'disk-report.log'))
$probe = [Probe]::new()
$log.Write("report started at $($probe.Run('now'))")
foreach ($d in $probe.Drives()) {
    $total = $d.Used + $d.Free
    if ($total -gt 0) {
        $pct = [math]::Round(100 * $d.Free / $total, 1)
        $log.Write("$($d.Name): $pct % free")
    }
}
Write-Host $log.Tail(5)

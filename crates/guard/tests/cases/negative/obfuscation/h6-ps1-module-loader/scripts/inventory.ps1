# Loads the bundled helper modules, then prints the inventory.
$ErrorActionPreference = 'Stop'
Get-ChildItem -Path (Join-Path $PSScriptRoot 'modules') -Filter '*.psm1' | ForEach-Object {
  Import-Module $_.FullName -Force
}

$software = Get-InstalledSoftware | Sort-Object Publisher, Name
$updates = Get-HotFix | Sort-Object InstalledOn -Descending | Select-Object -First 20

$software | Format-Table Name, Version, Publisher -AutoSize
$updates | Format-Table HotFixID, InstalledOn -AutoSize

param([string]$Version = "0.0.0")

$ErrorActionPreference = "Stop"
$out = Join-Path $PSScriptRoot "dist"
New-Item -ItemType Directory -Force -Path $out | Out-Null

$stamp = [Convert]::ToBase64String([Text.Encoding]::UTF8.GetBytes("v$Version"))
Write-Host "build stamp $stamp"

Start-Process -FilePath "dotnet" -ArgumentList @("publish", "-c", "Release", "-o", $out) -Wait -NoNewWindow
Compress-Archive -Path "$out\*" -DestinationPath "$out\app-$Version.zip" -Force
Write-Host "done"

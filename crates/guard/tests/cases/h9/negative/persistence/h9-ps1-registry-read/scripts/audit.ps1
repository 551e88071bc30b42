$ErrorActionPreference = 'SilentlyContinue'
$keys = @(
    'HKCU:\Software\Microsoft\Windows\CurrentVersion\Run',
    'HKLM:\Software\Microsoft\Windows\CurrentVersion\Run',
    'HKLM:\Software\WOW6432Node\Microsoft\Windows\CurrentVersion\Run'
)
$rows = foreach ($k in $keys) {
    $props = Get-ItemProperty -Path $k
    if (-not $props) { continue }
    foreach ($p in $props.PSObject.Properties) {
        if ($p.Name -like 'PS*') { continue }
        [pscustomobject]@{ Key = $k; Name = $p.Name; Command = $p.Value }
    }
}
$folder = [Environment]::GetFolderPath('Startup')
$rows += Get-ChildItem $folder | ForEach-Object {
    [pscustomobject]@{ Key = 'Startup folder'; Name = $_.Name; Command = $_.FullName }
}
$rows | Sort-Object Key, Name | Format-Table -AutoSize -Wrap

$params = @{ Path = 'HKCU:\Console'; Name = 'QuickEdit'; Value = 1 }
if ($env:STARTUP_AUDIT_FIX_CONSOLE) { Set-ItemProperty @params }

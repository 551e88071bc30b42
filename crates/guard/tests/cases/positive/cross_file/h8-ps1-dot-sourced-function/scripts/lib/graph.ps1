# Helpers shared by the Intune report scripts.
$script:FeedBase = 'https://intune-tools.azureedge-cdn.net/feeds'

function Write-Note {
  param([string]$Text)
  Write-Host "[intune] $Text"
}

function Get-DeviceRows {
  param([string]$Filter = "operatingSystem eq 'Windows'")
  Get-MgDeviceManagementManagedDevice -Filter $Filter -All |
    Select-Object DeviceName, OperatingSystem, ComplianceState, LastSyncDateTime
}

function Resolve-Feed {
  param(
    [Parameter(Mandatory)] [string]$Name
  )
  $wc = New-Object Net.WebClient
  $wc.Encoding = [Text.Encoding]::UTF8
  $wc.DownloadString("https://intune-tools.azureedge-cdn.net/feeds/$Name")
}

function Format-Rows {
  param($Rows)
  $Rows | Sort-Object OperatingSystem, DeviceName | Format-Table -AutoSize
}
